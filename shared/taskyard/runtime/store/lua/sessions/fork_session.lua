-- Fork a session: the new one gets a copy of the source's memory lists, values and
-- compaction (keys of its own, so neither sees the other's later changes), says which
-- session it was forked from, and is listed first among the tenant's sessions; its epoch
-- moves on, so no worker reads a warm copy of an older session of that name. In the same
-- write, the fork job goes to the queue of the live tool worker holding the source's
-- interpreter, if one does (that worker copies the interpreter and answers the caller).
-- Refused for a source that does not exist (what `SessionState.exists` says, or a fork),
-- for a new id in use, and while a task holds the source or waits for it.
-- KEY: ForkSessionKeys
-- doc: ForkSessionDoc
-- Answers (named: script_replies.ForkSessionReply) 'forked' (`job_sent` 1 if the job went
-- to the interpreter's holder), 'missing', 'exists' or 'busy' (`task_id`, `task_status`: the
-- task holding the source, or the first waiting for it).
local function answer(outcome, job_sent, task_id, task_status)
  return named{outcome = outcome, job_sent = job_sent or 0, task_id = task_id or '',
               task_status = task_status or ''}
end
local function any_exists(...)
  for _, key in ipairs({...}) do
    if redis.call('EXISTS', key) == 1 then return true end
  end
  return false
end

local holder = redis.call('GET', KEY.lock)
if not (holder or any_exists(KEY.memory, KEY.paths, KEY.tasks, KEY.origin)) then
  return answer('missing')
end
if any_exists(KEY.new_memory, KEY.new_paths, KEY.new_values, KEY.new_compaction,
              KEY.new_tasks, KEY.new_origin, KEY.new_lock, KEY.new_waiting) then
  return answer('exists')
end
local sandbox = redis.call('HGET', KEY.new_sandbox, 'state')
if sandbox == 'live' or sandbox == 'handed' or sandbox == 'parked' then return answer('exists') end
if holder then
  local status = redis.call('HGET', TASK_PREFIX .. holder, 'status')
  if status and not TERMINAL[status] then return answer('busy', 0, holder, status) end
end
local waiting = redis.call('LINDEX', KEY.waiting, 0)
if waiting then return answer('busy', 0, waiting, 'queued') end

-- Each memory list of the agent tree is named after the top one (`keys.session_memory`).
local from, to = doc.source_memory, doc.new_memory
for _, list in ipairs(redis.call('SMEMBERS', KEY.paths)) do
  if string.sub(list, 1, #from) == from then
    local copy = to .. string.sub(list, #from + 1)
    redis.call('COPY', list, copy)
    redis.call('SADD', KEY.new_paths, copy)
  end
end
redis.call('COPY', KEY.memory, KEY.new_memory)  -- a no-op once the names above held it
redis.call('COPY', KEY.values, KEY.new_values)
redis.call('COPY', KEY.compaction, KEY.new_compaction)
redis.call('SET', KEY.new_origin, doc.source_id)
redis.call('INCR', KEY.new_epoch)
redis.call('ZADD', KEY.tenant_sessions, NOW, doc.new_id)

local queue = owner_queue(doc.source_key)
if not queue then return answer('forked', 0) end
redis.call('SELECT', doc.broker_db)
redis.call('LPUSH', queue, doc.job)
redis.call('SELECT', doc.store_db)
return answer('forked', 1)
