-- End a task that has not ended (cancel, limits, failures) and pass its session on, or take
-- it out of the session's waiting list.
-- KEYS: task, events, session lock, session waiting list
-- ARGV: task id, status, status event data, store db, broker db, why (for a parent task),
--       then fields as name, value pairs
local status = redis.call('HGET', KEYS[1], 'status')
if not status or TERMINAL[status] then return {'ended_already', status or ''} end
redis.call('HSET', KEYS[1], 'status', ARGV[2], unpack(ARGV, 7))
close_ended(KEYS[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6])
return {'ended', release_session(KEYS[3], KEYS[4], ARGV[1], ARGV[4], ARGV[5])}
