-- Fork a session: the new one gets a copy of the source's memory lists, values and
-- compaction (keys of its own, so neither sees the other's later changes), says which
-- session it was forked from, and is listed first among the tenant's sessions; its epoch
-- moves on, so no worker reads a warm copy of an older session of that name. In the same
-- write, the fork job goes to the queue of the live tool worker holding the source's
-- interpreter, if one does (that worker copies the interpreter and answers the caller).
-- Refused for a source that does not exist (what `SessionState.exists` says, or a fork),
-- for a new id in use, and while a task holds the source or waits for it.
-- KEYS: source: lock, waiting list, top memory list, memory list names, values,
--       compaction, task index, origin;
--       new: top memory list, memory list names, values, compaction, task index, origin,
--       lock, waiting list, sandbox record, epoch;
--       the tenant's session index
-- doc: ForkSessionDoc
-- Returns {'forked', '1' if the job went to the interpreter's holder else '0'}, {'missing'},
-- {'exists'} or {'busy', the task holding (or first waiting for) the source, its status}.
local function any_exists(first, last)
  for i = first, last do
    if redis.call('EXISTS', KEYS[i]) == 1 then return true end
  end
  return false
end

local holder = redis.call('GET', KEYS[1])
if not (holder or any_exists(3, 4) or any_exists(7, 8)) then return {'missing'} end
if any_exists(9, 16) then return {'exists'} end
local sandbox = redis.call('HGET', KEYS[17], 'state')
if sandbox == 'live' or sandbox == 'handed' or sandbox == 'parked' then return {'exists'} end
if holder then
  local status = redis.call('HGET', TASK_PREFIX .. holder, 'status')
  if status and not TERMINAL[status] then return {'busy', holder, status} end
end
local waiting = redis.call('LINDEX', KEYS[2], 0)
if waiting then return {'busy', waiting, 'queued'} end

-- Each memory list of the agent tree is named after the top one (`keys.session_memory`).
local from, to = doc.source_memory, doc.new_memory
for _, list in ipairs(redis.call('SMEMBERS', KEYS[4])) do
  if string.sub(list, 1, #from) == from then
    local copy = to .. string.sub(list, #from + 1)
    redis.call('COPY', list, copy)
    redis.call('SADD', KEYS[10], copy)
  end
end
redis.call('COPY', KEYS[3], KEYS[9])  -- a no-op once the names above held it
redis.call('COPY', KEYS[5], KEYS[11])
redis.call('COPY', KEYS[6], KEYS[12])
redis.call('SET', KEYS[14], doc.source_id)
redis.call('INCR', KEYS[18])
redis.call('ZADD', KEYS[19], now(), doc.new_id)

local queue = owner_queue(doc.source_key)
if not queue then return {'forked', '0'} end
redis.call('SELECT', doc.broker_db)
redis.call('LPUSH', queue, doc.job)
redis.call('SELECT', doc.store_db)
return {'forked', '1'}
