-- Store a new schedule, unless its tenant has as many as allowed already.
-- KEYS: the schedule, the tenant's schedule index, the schedules due
-- ARGV: schedule id, created at, next run at, the most a tenant may have, then the
--       schedule's fields as name, value pairs
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 5))
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
return 1
