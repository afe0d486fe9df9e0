-- A person's decision on a call held for approval: approve pushes its tool job (with the
-- arguments as approved); deny stores the denial as the call's result (which may complete
-- the step and push the next one). Once no call is left pending the task waits on its tools.
-- KEYS: task, events, the step's approvals, the step's results, the step's advance claim
-- doc: DecideApprovalDoc
local status = redis.call('HGET', KEYS[1], 'status')
local current = redis.call('HGET', KEYS[1], 'step') == tostring(tonumber(doc.step) + 1)
if not status or TERMINAL[status] or not current then return {'unknown', ''} end
local entry = redis.call('HGET', KEYS[3], doc.call_id)
if not entry then return {'unknown', ''} end
local state = cjson.decode(entry)['state']
if state ~= 'pending' then return {'decided', state} end
redis.call('HSET', KEYS[3], doc.call_id, doc.state)
local member = task_id_of(KEYS[1]) .. '|' .. doc.step .. '|' .. doc.call_id
redis.call('ZREM', APPROVAL_DEADLINES, member)
add_event(KEYS[2], 'approval_decided', doc.event)
local still_pending = false
for _, value in ipairs(redis.call('HVALS', KEYS[3])) do
  if cjson.decode(value)['state'] == 'pending' then still_pending = true break end
end
if not still_pending and status == 'waiting_approval' then
  redis.call('HSET', KEYS[1], 'status', 'waiting_tools')
  add_event(KEYS[2], 'status', doc.waiting_event)
  notify(KEYS[1], 'waiting_tools', doc.store_db, doc.broker_db)
end
moved(KEYS[1])
if #doc.tool_job > 0 then
  push_jobs(doc.store_db, doc.broker_db, doc.tool_job)
  return {'approved', ''}
end
store_result(KEYS[4], KEYS[1], KEYS[2], KEYS[5], doc.step, doc.call_id, doc.denial, doc.ttl_s,
             doc.store_db, doc.broker_db, doc.next_step)
return {'denied', ''}
