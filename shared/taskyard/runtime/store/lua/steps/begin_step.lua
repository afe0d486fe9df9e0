-- Start a step of a task: mark it running and read, in one round trip, what the step needs:
-- the task, the previous step's tool results, each memory's messages after the offset the
-- caller already holds (all of them if the session was rewritten meanwhile), the session's
-- values (the agent tree's state that is not messages) and, when a memory is read whole,
-- the session's compaction (what a summary replaces for the model). A task's first step
-- marks what the session held before it (`mark_session`), for a rollback.
-- KEY: BeginStepKeys
-- doc: BeginStepDoc (its offsets: one per memory list, in KEY.memories' order)
-- Answers (named: script_replies.BEGIN_STEP) 'missing' (no such task), 'stale'
-- (a step not current, or the task ended: only the task) or 'begun', with what it read.
local task = redis.call('HGETALL', KEY.task)
if #task == 0 then return named{outcome = 'missing', task = task} end
local status = redis.call('HGET', KEY.task, 'status')
if redis.call('HGET', KEY.task, 'step') ~= doc.step or TERMINAL[status] then
  return named{outcome = 'stale', task = task}
end
local began = 0
if status ~= 'running' then
  redis.call('HSET', KEY.task, 'status', 'running', 'updated_at', doc.updated_at)
  add_event(KEY.events, 'status', doc.running)
  tell_parent(KEY.task, 'running')
  notify(KEY.task, 'running', doc.store_db, doc.broker_db)
  began = 1
end
moved(KEY.task)
if doc.step == '0' then mark_session(KEY.session_before, KEY.paths, KEY.values, KEY.compaction) end
local epoch = redis.call('GET', KEY.epoch) or '0'
local memories, whole = {}, false
for i, list in ipairs(KEY.memories) do
  local offset = doc.offsets[i]
  if epoch ~= doc.epoch or offset > redis.call('LLEN', list) then offset = 0 end
  whole = whole or offset == 0
  memories[i] = {offset, redis.call('LRANGE', list, offset, -1)}
end
return named{outcome = 'begun', task = task, began = began,
             results = redis.call('HGETALL', KEY.results), epoch = epoch, memories = memories,
             compaction = whole and redis.call('HGETALL', KEY.compaction) or {},
             values = redis.call('HGETALL', KEY.values)}
