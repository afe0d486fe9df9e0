-- Store one tool call's result (the first write wins) and its message event, and say whether
-- this result completed the step's calls; exactly one caller gets the advance claim (and
-- pushes the next step's job). A worker that claimed the call (claim_call.lua) frees its
-- claim in the same write, and stamps the last use on its session's sandbox record
-- (claim_session.lua).
-- KEYS: results of the step, task, events, the step's advance claim, then with a claim the
--       call's claim, the worker's claims set and the session's interpreter state
-- doc: PutToolResultDoc
local claim = doc.claim
if claim then
  if redis.call('GET', KEYS[5]) == claim.worker then
    redis.call('DEL', KEYS[5])
    redis.call('SREM', KEYS[6], KEYS[5])
  end
  if claim.used ~= '' and redis.call('EXISTS', KEYS[7]) == 1 then
    redis.call('HSET', KEYS[7], 'last_used', claim.used)
    redis.call('EXPIRE', KEYS[7], claim.record_ttl_s)
  end
end
return store_result(KEYS[1], KEYS[2], KEYS[3], KEYS[4], doc.step, doc.call_id, doc.message,
                    doc.ttl_s, doc.store_db, doc.broker_db, doc.next_step)
