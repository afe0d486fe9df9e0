-- A tool worker stopping on purpose hands its sessions' running interpreters over. Each record
-- it still holds keeps the interpreter's handle and why it was handed over (what the model
-- reads should nobody take it over), and names the worker chosen to ('handed': the session's jobs go to that
-- worker, which takes the interpreter over on the next call) or none ('parked': whichever
-- worker where the interpreter runs gets the next call takes it over).
-- KEYS: the sessions' sandbox records
-- ARGV: the leaving worker's node name and incarnation, the reason, then per key one JSON
--       document {"handle", "node", "incarnation", "queue"} (node '' : nobody chosen)
local handed = 0
for i, key in ipairs(KEYS) do
  local f = redis.call('HMGET', key, 'node', 'incarnation')
  if f[1] == ARGV[1] and f[2] == ARGV[2] then
    local to = cjson.decode(ARGV[3 + i])
    if to.node ~= '' then
      redis.call('HSET', key, 'state', 'handed', 'node', to.node, 'incarnation', to.incarnation,
                 'queue', to.queue)
    else
      redis.call('HSET', key, 'state', 'parked')
    end
    redis.call('HSET', key, 'sandbox', to.handle, 'reason', ARGV[3])
    handed = handed + 1
  end
end
return handed
