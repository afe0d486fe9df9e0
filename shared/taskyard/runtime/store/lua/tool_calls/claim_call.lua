-- Claim a tool call for a worker to run, unless its result is in or another worker holds it.
-- KEY: ClaimCallKeys
-- doc: ClaimCallDoc
-- Returns 'done', 'busy' or 'claimed'.
if redis.call('HEXISTS', KEY.results, doc.call_id) == 1 then return 'done' end
-- Taken at once unless held; a claim of a tool worker whose heartbeat lapsed (killed, host
-- gone) holds nothing back.
if not redis.call('SET', KEY.claim, doc.worker, 'NX', 'PX', doc.ttl_ms) then
  local holder = redis.call('GET', KEY.claim)
  if redis.call('EXISTS', string.format(WORKER_ALIVE_KEY, holder)) == 1 then
    return 'busy'
  end
  redis.call('SET', KEY.claim, doc.worker, 'PX', doc.ttl_ms)
end
redis.call('SADD', KEY.worker_claims, KEY.claim)
return 'claimed'
