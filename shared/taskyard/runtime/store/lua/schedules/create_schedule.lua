-- Store a new schedule, unless its tenant has as many as allowed already.
-- KEYS: the schedule, the tenant's schedule index, the schedules due
-- doc: CreateScheduleDoc
if redis.call('ZCARD', KEYS[2]) >= doc.max_per_tenant then return 0 end
hset_fields(KEYS[1], doc.fields)
redis.call('ZADD', KEYS[2], doc.created_at, doc.schedule_id)
redis.call('ZADD', KEYS[3], doc.next_run_at, doc.schedule_id)
return 1
