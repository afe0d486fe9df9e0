-- A tool worker stopping on purpose hands its sessions' running interpreters over. Each record
-- it still holds keeps the interpreter's handle and why it was handed over (what the model
-- reads should nobody take it over), and names the worker chosen to ('handed': the session's jobs go to that
-- worker, which takes the interpreter over on the next call) or none ('parked': whichever
-- worker where the interpreter runs gets the next call takes it over). The sessions of one
-- container of several are handed to one worker together.
-- KEY: RecordsKeys
-- doc: HandOverDoc (the leaving worker's node and incarnation, the reason, and per key
--      where it goes: {handle, node, incarnation, queue}, node '' when nobody was chosen)
local handed = 0
for i, key in ipairs(KEY.records) do
  local f = redis.call('HMGET', key, 'node', 'incarnation')
  if f[1] == doc.node and f[2] == doc.incarnation then
    local to = doc.to[i]
    if to.node ~= '' then
      redis.call('HSET', key, 'state', 'handed', 'node', to.node, 'incarnation', to.incarnation,
                 'queue', to.queue)
    else
      redis.call('HSET', key, 'state', 'parked')
    end
    redis.call('HSET', key, 'sandbox', to.handle, 'reason', doc.reason)
    -- A container of several sessions goes to one worker (see claim_session).
    local host = string.match(to.handle, '^(.*)#')
    if host then
      local host_key = string.format(SANDBOX_HOST_KEY, host)
      if to.node ~= '' then
        redis.call('HSET', host_key, 'node', to.node, 'incarnation', to.incarnation,
                   'queue', to.queue)
        local ttl = redis.call('TTL', key)  -- as long as the record (-1: none set)
        if ttl > 0 then redis.call('EXPIRE', host_key, ttl) end
      else
        redis.call('DEL', host_key)
      end
    end
    handed = handed + 1
  end
end
return handed
