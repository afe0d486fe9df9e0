-- A tool worker's interpreters for these sessions ended: each record it still holds says why
-- (the next call, wherever it runs, tells the model), or goes when nothing was lost.
-- KEY: RecordsKeys
-- doc: EndSessionsDoc (one reason per key, '' when no state was lost)
local ended = 0
for i, key in ipairs(KEY.records) do
  local f = redis.call('HMGET', key, 'node', 'incarnation')
  if f[1] == doc.node and f[2] == doc.incarnation then
    if doc.reasons[i] == '' then
      redis.call('DEL', key)
    else
      redis.call('HSET', key, 'state', 'lost', 'reason', doc.reasons[i])
    end
    ended = ended + 1
  end
end
return ended
