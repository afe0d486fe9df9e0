-- Claim a tool call for a worker to run, unless its result is in or another worker holds it.
-- KEYS: the step's results, the call's claim, the worker's claims set
-- doc: ClaimCallDoc
-- Returns 'done', 'busy' or 'claimed'.
if redis.call('HEXISTS', KEYS[1], doc.call_id) == 1 then return 'done' end
-- A claim of a tool worker whose heartbeat lapsed (killed, host gone) holds nothing back.
local holder = redis.call('GET', KEYS[2])
if holder and redis.call('EXISTS', string.format(WORKER_ALIVE_KEY, holder)) == 0 then
  redis.call('DEL', KEYS[2])
end
if not redis.call('SET', KEYS[2], doc.worker, 'NX', 'PX', doc.ttl_ms) then return 'busy' end
redis.call('SADD', KEYS[3], KEYS[2])
return 'claimed'
