-- End a task that has not ended (cancel, limits, failures) and pass its session on (pushing
-- the next task's first step), or take it out of the session's waiting list.
-- KEYS: task, events, session lock, session waiting list
-- doc: EndTaskDoc
local status = redis.call('HGET', KEYS[1], 'status')
if not status or TERMINAL[status] then return {'ended_already', status or ''} end
hset_fields(KEYS[1], doc.fields, {'status', doc.status})
close_ended(KEYS[1], doc.status, doc.event, doc.store_db, doc.broker_db, doc.why)
return {'ended', release_session(KEYS[3], KEYS[4], doc.task_id, doc.store_db, doc.broker_db)}
