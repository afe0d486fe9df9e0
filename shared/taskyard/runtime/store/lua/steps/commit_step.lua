-- Apply one agent step exactly once, with every job that follows from it: memory appends,
-- session values, message events, the task's new state, token usage and the status event,
-- the tool jobs it starts and the calls it holds for approval; an ending step passes the
-- session on (pushing the next task's first step).
-- KEY: CommitStepKeys
-- doc: CommitStepDoc (its memories: one list of messages per memory list, in KEY.memories'
--      order)
-- Answers (named: script_replies.StepCommitReply) 'conflict' or 'committed', and the task
-- the session passed to ('' for none).
local status = redis.call('HGET', KEY.task, 'status')
if not status or redis.call('HGET', KEY.task, 'step') ~= doc.step or TERMINAL[status] then
  return named{outcome = 'conflict', following = ''}
end
for _, event in ipairs(doc.events) do add_event(KEY.events, event.kind, event.data) end
for i, list in ipairs(KEY.memories) do
  local messages = doc.memories[i]
  if #messages > 0 then
    redis.call('RPUSH', list, unpack(messages))
    redis.call('SADD', KEY.paths, list)
  end
end
hset_fields(KEY.values, doc.values)
push_jobs(doc.store_db, doc.broker_db, doc.jobs)
local task_id = task_id_of(KEY.task)
for call_id, state in pairs(doc.held) do
  redis.call('HSET', KEY.approvals, call_id, state)
  if doc.approval_timeout_s then
    local member = task_id .. '|' .. doc.step .. '|' .. call_id
    redis.call('ZADD', APPROVAL_DEADLINES, now() + doc.approval_timeout_s, member)
  end
end
hset_fields(KEY.task, doc.fields, {'step', tostring(tonumber(doc.step) + 1), 'status', doc.status})
redis.call('HINCRBY', KEY.task, 'prompt_tokens', doc.prompt_tokens)
redis.call('HINCRBY', KEY.task, 'completion_tokens', doc.completion_tokens)
-- A child's tokens count toward every ancestor's budget too.
for _, ancestor in ipairs(cjson.decode(redis.call('HGET', KEY.task, 'ancestors') or '[]')) do
  redis.call('HINCRBY', TASK_PREFIX .. ancestor, 'prompt_tokens', doc.prompt_tokens)
  redis.call('HINCRBY', TASK_PREFIX .. ancestor, 'completion_tokens', doc.completion_tokens)
end
add_event(KEY.events, 'status', doc.event)
tell_parent(KEY.task, doc.status)
notify(KEY.task, doc.status, doc.store_db, doc.broker_db)
if doc.ends then
  ended(KEY.task)
  deliver_to_parent(KEY.task, doc.store_db, doc.broker_db,
                    redis.call('HGET', KEY.task, 'result') or '', nil)
  local following = release_session(KEY.lock, KEY.waiting, task_id, doc.store_db, doc.broker_db)
  return named{outcome = 'committed', following = following}
end
moved(KEY.task)
return named{outcome = 'committed', following = ''}
