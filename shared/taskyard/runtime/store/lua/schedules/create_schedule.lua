-- Store a new schedule, unless its tenant has as many as allowed already.
-- KEY: CreateScheduleKeys
-- doc: CreateScheduleDoc
if redis.call('ZCARD', KEY.tenant_schedules) >= doc.max_per_tenant then return 0 end
hset_fields(KEY.schedule, doc.fields)
redis.call('ZADD', KEY.tenant_schedules, doc.created_at, doc.schedule_id)
redis.call('ZADD', KEY.due, doc.next_run_at, doc.schedule_id)
return 1
