-- Move a schedule past the run time a tick acted on, once: only if its next run is still
-- the one the tick read (a second tick, or a schedule deleted meanwhile, changes nothing).
-- Counts the run or the missed times and keeps the run's record, the latest first.
-- KEY: AdvanceScheduleKeys
-- doc: AdvanceScheduleDoc
if redis.call('HGET', KEY.schedule, 'next_run_at') ~= doc.read_next_run_at then return 0 end
redis.call('HSET', KEY.schedule, 'next_run_at', doc.next_run_at)
if doc.last_run_at ~= '' then redis.call('HSET', KEY.schedule, 'last_run_at', doc.last_run_at) end
redis.call('HINCRBY', KEY.schedule, 'runs', doc.runs)
redis.call('HINCRBY', KEY.schedule, 'missed_runs', doc.missed)
redis.call('ZADD', KEY.due, doc.next_run_at, doc.schedule_id)
redis.call('LPUSH', KEY.runs, doc.run)
redis.call('LTRIM', KEY.runs, 0, doc.kept - 1)
return 1
