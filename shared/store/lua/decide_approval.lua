-- A person's decision on a call held for approval: approve pushes its tool job (with the
-- arguments as approved); deny stores the denial as the call's result (which may complete
-- the step and push the next one). Once no call is left pending the task waits on its tools.
-- KEYS: task, events, the step's approvals, the step's results, the step's advance claim
-- ARGV: step, call id, 'approve' or 'deny', the decided state JSON, decided event data,
--       store db, broker db, the tool job's queue and message (approve), the denial result
--       message JSON (deny), results ttl, the next step's queue and message (deny),
--       the waiting_tools status event data, the tool job's sticky session ('' for none)
local status = redis.call('HGET', KEYS[1], 'status')
local current = redis.call('HGET', KEYS[1], 'step') == tostring(tonumber(ARGV[1]) + 1)
if not status or TERMINAL[status] or not current then return {'unknown', ''} end
local entry = redis.call('HGET', KEYS[3], ARGV[2])
if not entry then return {'unknown', ''} end
local state = cjson.decode(entry)['state']
if state ~= 'pending' then return {'decided', state} end
redis.call('HSET', KEYS[3], ARGV[2], ARGV[4])
redis.call('ZREM', APPROVAL_DEADLINES, task_id_of(KEYS[1]) .. '|' .. ARGV[1] .. '|' .. ARGV[2])
add_event(KEYS[2], 'approval_decided', ARGV[5])
local still_pending = false
for _, value in ipairs(redis.call('HVALS', KEYS[3])) do
  if cjson.decode(value)['state'] == 'pending' then still_pending = true break end
end
if not still_pending and status == 'waiting_approval' then
  redis.call('HSET', KEYS[1], 'status', 'waiting_tools')
  add_event(KEYS[2], 'status', ARGV[14])
  notify(KEYS[1], 'waiting_tools', ARGV[6], ARGV[7])
end
moved(KEYS[1])
if ARGV[3] == 'approve' then
  push_jobs(ARGV[6], ARGV[7], {ARGV[8], ARGV[15], ARGV[9]})
  return {'approved', ''}
end
store_result(KEYS[4], KEYS[1], KEYS[2], KEYS[5], ARGV[1], ARGV[2], ARGV[10], ARGV[11],
             ARGV[6], ARGV[7], {ARGV[12], '', ARGV[13]})
return {'denied', ''}
