-- Apply one agent step exactly once, with every job that follows from it: memory appends,
-- session values, message events, the task's new state, token usage and the status event,
-- the tool jobs it starts and the calls it holds for approval; an ending step passes the
-- session on (pushing the next task's first step).
-- KEYS: task, events, session lock, session waiting list, the session's memory list names,
--       the step's approvals, the session's values, memory lists...
-- doc: CommitStepDoc (its memories: one list of messages per memory list, in the keys' order)
local status = redis.call('HGET', KEYS[1], 'status')
if not status or redis.call('HGET', KEYS[1], 'step') ~= doc.step or TERMINAL[status] then
  return {'conflict', ''}
end
for _, event in ipairs(doc.events) do add_event(KEYS[2], event.kind, event.data) end
for k = 8, #KEYS do
  local messages = doc.memories[k - 7]
  if #messages > 0 then
    redis.call('RPUSH', KEYS[k], unpack(messages))
    redis.call('SADD', KEYS[5], KEYS[k])
  end
end
hset_fields(KEYS[7], doc.values)
push_jobs(doc.store_db, doc.broker_db, doc.jobs)
local task_id = task_id_of(KEYS[1])
for call_id, state in pairs(doc.held) do
  redis.call('HSET', KEYS[6], call_id, state)
  if doc.approval_timeout_s then
    local member = task_id .. '|' .. doc.step .. '|' .. call_id
    redis.call('ZADD', APPROVAL_DEADLINES, now() + doc.approval_timeout_s, member)
  end
end
hset_fields(KEYS[1], doc.fields, {'step', tostring(tonumber(doc.step) + 1), 'status', doc.status})
redis.call('HINCRBY', KEYS[1], 'prompt_tokens', doc.prompt_tokens)
redis.call('HINCRBY', KEYS[1], 'completion_tokens', doc.completion_tokens)
-- A child's tokens count toward every ancestor's budget too.
for _, ancestor in ipairs(cjson.decode(redis.call('HGET', KEYS[1], 'ancestors') or '[]')) do
  redis.call('HINCRBY', TASK_PREFIX .. ancestor, 'prompt_tokens', doc.prompt_tokens)
  redis.call('HINCRBY', TASK_PREFIX .. ancestor, 'completion_tokens', doc.completion_tokens)
end
add_event(KEYS[2], 'status', doc.event)
tell_parent(KEYS[1], doc.status)
notify(KEYS[1], doc.status, doc.store_db, doc.broker_db)
if doc.ends then
  ended(KEYS[1])
  deliver_to_parent(KEYS[1], doc.store_db, doc.broker_db,
                    redis.call('HGET', KEYS[1], 'result') or '', nil)
  return {'committed', release_session(KEYS[3], KEYS[4], task_id, doc.store_db, doc.broker_db)}
end
moved(KEYS[1])
return {'committed', ''}
