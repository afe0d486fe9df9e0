-- A tool worker's interpreters for these sessions ended: each record it still holds says why
-- (the next call, wherever it runs, tells the model), or goes when nothing was lost.
-- KEYS: the sessions' sandbox records
-- ARGV: the worker's node name, incarnation, then one reason per key ('' when no state)
local ended = 0
for i, key in ipairs(KEYS) do
  local f = redis.call('HMGET', key, 'node', 'incarnation')
  if f[1] == ARGV[1] and f[2] == ARGV[2] then
    if ARGV[i + 2] == '' then
      redis.call('DEL', key)
    else
      redis.call('HSET', key, 'state', 'lost', 'reason', ARGV[i + 2])
    end
    ended = ended + 1
  end
end
return ended
