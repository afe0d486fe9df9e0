-- Add an event while the task is live: nothing follows a task's final event.
-- KEY: TaskKeys
-- doc: PublishDoc
local status = redis.call('HGET', KEY.task, 'status')
if not status or TERMINAL[status] then return false end
return add_event(KEY.events, doc.kind, doc.data)
