-- Move a schedule past the run time a tick acted on, once: only if its next run is still
-- the one the tick read (a second tick, or a schedule deleted meanwhile, changes nothing).
-- Counts the run or the missed times and keeps the run's record, the latest first.
-- KEYS: the schedule, its runs, the schedules due
-- ARGV: schedule id, next run the tick read, the next run after it, last run at ('' if it
--       did not run), runs made (0 or 1), run times missed, the run's JSON, runs kept
if redis.call('HGET', KEYS[1], 'next_run_at') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'next_run_at', ARGV[3])
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'last_run_at', ARGV[4]) end
redis.call('HINCRBY', KEYS[1], 'runs', ARGV[5])
redis.call('HINCRBY', KEYS[1], 'missed_runs', ARGV[6])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
redis.call('LPUSH', KEYS[2], ARGV[7])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[8]) - 1)
return 1
