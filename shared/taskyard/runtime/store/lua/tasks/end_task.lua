-- End a task that has not ended (cancel, limits, failures) and pass its session on (pushing
-- the next task's first step), or take it out of the session's waiting list.
-- KEY: EndTaskKeys
-- doc: EndTaskDoc
-- Answers (named: script_replies.TaskEndReply) 'ended' or 'ended_already', and the task the
-- session passed to ('' for none).
local status = redis.call('HGET', KEY.task, 'status')
if not status or TERMINAL[status] then return named{outcome = 'ended_already', following = ''} end
hset_fields(KEY.task, doc.fields, {'status', doc.status})
close_ended(KEY.task, doc.status, doc.event, doc.broker_db, doc.why)
local following = release_session(KEY.lock, KEY.waiting, doc.task_id, doc.broker_db)
return named{outcome = 'ended', following = following}
