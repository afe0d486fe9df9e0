-- Add an event while the task is live: nothing follows a task's final event.
-- KEYS: task, events
-- doc: PublishDoc
local status = redis.call('HGET', KEYS[1], 'status')
if not status or TERMINAL[status] then return false end
return add_event(KEYS[2], doc.kind, doc.data)
