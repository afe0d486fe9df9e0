-- Move a task that has not ended to another live state, with its event.
-- KEYS: task, events. ARGV: status, status event data, then fields as name, value pairs
local status = redis.call('HGET', KEYS[1], 'status')
if not status or TERMINAL[status] then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[1], unpack(ARGV, 3))
add_event(KEYS[2], 'status', ARGV[2])
moved(KEYS[1])
return 1
