-- Store one tool call's result (the first write wins) and its message event, and say whether
-- this result completed the step's calls; exactly one caller gets the advance claim.
-- KEYS: results of the step, task, events, the step's advance claim
-- ARGV: step, call id, message JSON ('' only to check an earlier result), results ttl,
--       store db, broker db, and the next step's queue and message (pushed by the caller
--       that completes the step)
local status = redis.call('HGET', KEYS[2], 'status')
if not status or TERMINAL[status] then return {'ended', '0'} end
if ARGV[3] ~= '' and redis.call('HSETNX', KEYS[1], ARGV[2], ARGV[3]) == 1 then
  redis.call('EXPIRE', KEYS[1], ARGV[4])
  add_event(KEYS[3], 'message', ARGV[3])
  moved(KEYS[2])
end
local next_step = tostring(tonumber(ARGV[1]) + 1)
if status ~= 'waiting_tools' or redis.call('HGET', KEYS[2], 'step') ~= next_step then
  return {'stored', '0'}
end
for _, call in ipairs(cjson.decode(redis.call('HGET', KEYS[2], 'pending_calls') or '[]')) do
  if redis.call('HEXISTS', KEYS[1], call['id']) == 0 then return {'stored', '0'} end
end
if redis.call('SET', KEYS[4], '1', 'NX', 'EX', ARGV[4]) then
  push_jobs(ARGV[5], ARGV[6], {ARGV[7], ARGV[8]})
  return {'complete', '1'}
end
return {'complete', '0'}
