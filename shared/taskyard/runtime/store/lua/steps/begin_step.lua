-- Start a step of a task: mark it running and read, in one round trip, what the step needs:
-- the task, the previous step's tool results, each memory's messages after the offset the
-- caller already holds (all of them if the session was rewritten meanwhile), the session's
-- values (the agent tree's state that is not messages) and, when a memory is read whole,
-- the session's compaction (what a summary replaces for the model). A task's first step
-- marks what the session held before it (`mark_session`), for a rollback, in the same HSET
-- that marks it running.
-- KEY: BeginStepKeys
-- doc: BeginStepDoc (its offsets: one per memory list, in KEY.memories' order)
-- Answers (named: script_replies.BEGIN_STEP) 'missing' (no such task), 'stale'
-- (a step not current, or the task ended: only the task) or 'begun', with what it read.
local task = redis.call('HGETALL', KEY.task)
if #task == 0 then return named{outcome = 'missing', task = task} end
-- The task as the caller reads it: without the rollback mark, which only the store reads.
local t, shown = {}, {}
for j = 1, #task, 2 do
  t[task[j]] = task[j + 1]
  if string.sub(task[j], 1, #BEFORE) ~= BEFORE then
    shown[#shown + 1] = task[j]
    shown[#shown + 1] = task[j + 1]
  end
end
if t.step ~= doc.step or TERMINAL[t.status] then return named{outcome = 'stale', task = shown} end
local first = doc.step == '0'
local values = redis.call('HGETALL', KEY.values)
local epoch = redis.call('GET', KEY.epoch) or '0'
-- Each memory list's messages, and its length, which the mark takes from them.
local memories, lengths, whole = {}, {}, false
for i, list in ipairs(KEY.memories) do
  local offset = doc.offsets[i]
  if epoch ~= doc.epoch then offset = 0 end
  -- From the message before the offset: none there, the list is shorter than the caller's
  -- copy (rewritten), so it is read whole; else that message is dropped.
  local messages = redis.call('LRANGE', list, math.max(offset - 1, 0), -1)
  if offset > 0 and #messages == 0 then
    offset, messages = 0, redis.call('LRANGE', list, 0, -1)
  elseif offset > 0 then
    table.remove(messages, 1)
  end
  whole = whole or offset == 0
  memories[i] = {offset, messages}
  lengths[list] = offset + #messages
end
local compaction = whole and redis.call('HGETALL', KEY.compaction) or {}
local fields, began = {}, 0
if t.status ~= 'running' then
  fields = {'status', 'running', 'updated_at', doc.updated_at}
  began = 1
end
if first and not t[BEFORE .. 'marked'] then
  mark_session(fields, KEY.paths, lengths, values)
end
if #fields > 0 then redis.call('HSET', KEY.task, unpack(fields)) end
if began == 1 then
  add_event(KEY.events, 'status', doc.running)
  tell_parent(KEY.task, 'running', t.parent_id)
  notify(KEY.task, 'running', doc.broker_db, t.webhook_events)
end
moved(KEY.task, t)
return named{outcome = 'begun', task = shown, began = began,
             results = first and {} or redis.call('HGETALL', KEY.results), epoch = epoch,
             memories = memories, compaction = compaction, values = values}
