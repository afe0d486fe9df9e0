-- Apply one agent step exactly once, with every job that follows from it: memory appends,
-- session values, message events, the task's new state, token usage and the status event,
-- the tool jobs it starts and the calls it holds for approval; an ending step passes the
-- session on (pushing the next task's first step).
-- KEY: CommitStepKeys
-- doc: CommitStepDoc (its memories: one list of messages per memory list, in KEY.memories'
--      order)
-- Answers (named: script_replies.StepCommitReply) 'conflict' or 'committed', and the task
-- the session passed to ('' for none).
local t = hmget(KEY.task, and_moved({'status', 'step', 'ancestors', 'parent_id',
                                     'webhook_events', 'prompt_tokens', 'completion_tokens'}))
if not t.status or t.step ~= doc.step or TERMINAL[t.status] then
  return named{outcome = 'conflict', following = ''}
end
for _, event in ipairs(doc.events) do add_event(KEY.events, event.kind, event.data) end
for i, list in ipairs(KEY.memories) do
  local messages = doc.memories[i]
  -- A list is named in the session's paths as it is made (a rollback drops it from there).
  if #messages > 0 and redis.call('RPUSH', list, unpack(messages)) == #messages then
    redis.call('SADD', KEY.paths, list)
  end
end
hset_fields(KEY.values, doc.values)
push_jobs(doc.broker_db, doc.jobs)
local task_id = task_id_of(KEY.task)
for call_id, state in pairs(doc.held) do
  redis.call('HSET', KEY.approvals, call_id, state)
  if doc.approval_timeout_s then
    local member = task_id .. '|' .. doc.step .. '|' .. call_id
    redis.call('ZADD', APPROVAL_DEADLINES, NOW + doc.approval_timeout_s, member)
  end
end
-- The token counts as HINCRBY would add them, in the task's one HSET.
local prompt = (tonumber(t.prompt_tokens) or 0) + doc.prompt_tokens
local completion = (tonumber(t.completion_tokens) or 0) + doc.completion_tokens
hset_fields(KEY.task, doc.fields, {'step', tostring(tonumber(doc.step) + 1), 'status', doc.status,
                                   'prompt_tokens', string.format('%d', prompt),
                                   'completion_tokens', string.format('%d', completion)})
-- A child's tokens count toward every ancestor's budget too.
for _, ancestor in ipairs(cjson.decode(t.ancestors or '[]')) do
  redis.call('HINCRBY', TASK_PREFIX .. ancestor, 'prompt_tokens', doc.prompt_tokens)
  redis.call('HINCRBY', TASK_PREFIX .. ancestor, 'completion_tokens', doc.completion_tokens)
end
add_event(KEY.events, 'status', doc.event)
tell_parent(KEY.task, doc.status, t.parent_id)
notify(KEY.task, doc.status, doc.broker_db, t.webhook_events)
if doc.ends then
  ended(KEY.task)
  if t.parent_id then
    deliver_to_parent(KEY.task, doc.broker_db, redis.call('HGET', KEY.task, 'result') or '', nil)
  end
  local following = release_session(KEY.lock, KEY.waiting, task_id, doc.broker_db)
  return named{outcome = 'committed', following = following}
end
moved(KEY.task, t)
return named{outcome = 'committed', following = ''}
