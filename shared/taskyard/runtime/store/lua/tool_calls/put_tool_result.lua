-- Store one tool call's result (the first write wins) and its message event, and say whether
-- this result completed the step's calls; exactly one caller gets the advance claim (and
-- pushes the next step's job). A worker that claimed the call (claim_call.lua) frees its
-- claim in the same write, stamps the last use on its session's sandbox record
-- (claim_session.lua) and records the interpreter cells the call ran (`doc.cells`: the
-- session keeps its last `keep`, services/tool_worker/cells.py).
-- KEY: PutToolResultKeys
-- doc: PutToolResultDoc
-- Answers as `store_result` does (script_replies.ResultStoredReply).
local claim = doc.claim
if claim then
  local call_claim, worker_claims, sandbox, cells = unpack(KEY.claim)
  if redis.call('GET', call_claim) == claim.worker then
    redis.call('DEL', call_claim)
    redis.call('SREM', worker_claims, call_claim)
  end
  -- EXPIRE answers whether the record exists: a gone one is not made again.
  if claim.used ~= '' and redis.call('EXPIRE', sandbox, claim.record_ttl_s) == 1 then
    redis.call('HSET', sandbox, 'last_used', claim.used)
  end
  if doc.cells then
    -- RPUSH answers the length: trimmed only once past what the session keeps.
    if redis.call('RPUSH', cells, unpack(doc.cells.codes)) > doc.cells.keep then
      redis.call('LTRIM', cells, -doc.cells.keep, -1)
    end
    redis.call('EXPIRE', cells, doc.cells.ttl_s)
  end
end
return store_result(KEY.results, KEY.task, KEY.events, KEY.advanced, doc.step, doc.call_id,
                    doc.message, doc.ttl_s, doc.broker_db, doc.next_step)
