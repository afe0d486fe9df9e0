-- Start a step of a task: mark it running and read, in one round trip, what the step needs:
-- the task, the previous step's tool results, each memory's messages after the offset the
-- caller already holds (all of them if the session was rewritten meanwhile), the session's
-- values (the agent tree's state that is not messages) and, when a memory is read whole,
-- the session's compaction (what a summary replaces for the model). A task's first step
-- marks what the session held before it (`mark_session`), for a rollback.
-- KEYS: task, events, previous step's results, session epoch, session compaction,
--       session values, the session's memory list names, the task's session mark,
--       memory lists...
-- doc: BeginStepDoc (its offsets: one per memory list, in the keys' order)
local fields = redis.call('HGETALL', KEYS[1])
if #fields == 0 then return {fields} end
local status = redis.call('HGET', KEYS[1], 'status')
if redis.call('HGET', KEYS[1], 'step') ~= doc.step or TERMINAL[status] then return {fields} end
local began = '0'
if status ~= 'running' then
  redis.call('HSET', KEYS[1], 'status', 'running', 'updated_at', doc.updated_at)
  add_event(KEYS[2], 'status', doc.running)
  tell_parent(KEYS[1], 'running')
  notify(KEYS[1], 'running', doc.store_db, doc.broker_db)
  began = '1'
end
moved(KEYS[1])
if doc.step == '0' then mark_session(KEYS[8], KEYS[7], KEYS[6], KEYS[5]) end
local epoch = redis.call('GET', KEYS[4]) or '0'
local memories, whole = {}, false
for i = 9, #KEYS do
  local offset = doc.offsets[i - 8]
  if epoch ~= doc.epoch or offset > redis.call('LLEN', KEYS[i]) then offset = 0 end
  whole = whole or offset == 0
  memories[#memories + 1] = {offset, redis.call('LRANGE', KEYS[i], offset, -1)}
end
local compaction = whole and redis.call('HGETALL', KEYS[5]) or {}
return {fields, began, redis.call('HGETALL', KEYS[3]), epoch, memories, compaction,
        redis.call('HGETALL', KEYS[6])}
