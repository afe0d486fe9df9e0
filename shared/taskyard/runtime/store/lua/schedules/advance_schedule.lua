-- Move a schedule past the run time a tick acted on, once: only if its next run is still
-- the one the tick read (a second tick, or a schedule deleted meanwhile, changes nothing).
-- Counts the run or the missed times and keeps the run's record, the latest first.
-- KEYS: the schedule, its runs, the schedules due
-- doc: AdvanceScheduleDoc
if redis.call('HGET', KEYS[1], 'next_run_at') ~= doc.read_next_run_at then return 0 end
redis.call('HSET', KEYS[1], 'next_run_at', doc.next_run_at)
if doc.last_run_at ~= '' then redis.call('HSET', KEYS[1], 'last_run_at', doc.last_run_at) end
redis.call('HINCRBY', KEYS[1], 'runs', doc.runs)
redis.call('HINCRBY', KEYS[1], 'missed_runs', doc.missed)
redis.call('ZADD', KEYS[3], doc.next_run_at, doc.schedule_id)
redis.call('LPUSH', KEYS[2], doc.run)
redis.call('LTRIM', KEYS[2], 0, doc.kept - 1)
return 1
