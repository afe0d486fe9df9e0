-- A person's decision on a call held for approval: approve pushes its tool job (with the
-- arguments as approved); deny stores the denial as the call's result (which may complete
-- the step and push the next one). Once no call is left pending the task waits on its tools.
-- KEY: DecideApprovalKeys
-- doc: DecideApprovalDoc
-- Answers (named: script_replies.ApprovalReply) 'unknown', 'decided' (with the `state` it
-- was decided as before), 'approved' or 'denied'.
local function answer(outcome, state)
  return named{outcome = outcome, state = state or ''}
end
local t = hmget(KEY.task, and_moved({'status', 'step', 'webhook_events'}))
local status, current = t.status, t.step == tostring(tonumber(doc.step) + 1)
if not status or TERMINAL[status] or not current then return answer('unknown') end
local entry = redis.call('HGET', KEY.approvals, doc.call_id)
if not entry then return answer('unknown') end
local state = cjson.decode(entry)['state']
if state ~= 'pending' then return answer('decided', state) end
redis.call('HSET', KEY.approvals, doc.call_id, doc.state)
local member = task_id_of(KEY.task) .. '|' .. doc.step .. '|' .. doc.call_id
redis.call('ZREM', APPROVAL_DEADLINES, member)
add_event(KEY.events, 'approval_decided', doc.event)
local still_pending = false
for _, value in ipairs(redis.call('HVALS', KEY.approvals)) do
  if cjson.decode(value)['state'] == 'pending' then still_pending = true break end
end
if not still_pending and status == 'waiting_approval' then
  redis.call('HSET', KEY.task, 'status', 'waiting_tools')
  add_event(KEY.events, 'status', doc.waiting_event)
  notify(KEY.task, 'waiting_tools', doc.broker_db, t.webhook_events)
end
moved(KEY.task, t)
if #doc.tool_job > 0 then
  push_jobs(doc.broker_db, doc.tool_job)
  return answer('approved')
end
store_result(KEY.results, KEY.task, KEY.events, doc.step, doc.call_id, doc.denial, doc.ttl_s,
             doc.broker_db, doc.next_step)
return answer('denied')
