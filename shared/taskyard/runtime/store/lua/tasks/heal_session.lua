-- Unstick a session for the sweep: a lock nobody holds while tasks wait goes to the first of
-- them; a lock held by a task that ended passes on. Returns the task that took it, or ''.
-- The task that takes it has its first step pushed in the same write.
-- KEY: SessionKeys
-- doc: DatabasesDoc
local holder = redis.call('GET', KEY.lock)
if not holder then
  local following = redis.call('LPOP', KEY.waiting)
  if not following then return '' end
  give_session(KEY.lock, following, doc.broker_db)
  return following
end
local status = redis.call('HGET', TASK_PREFIX .. holder, 'status')
if status and not TERMINAL[status] then return '' end
return release_session(KEY.lock, KEY.waiting, holder, doc.broker_db)
