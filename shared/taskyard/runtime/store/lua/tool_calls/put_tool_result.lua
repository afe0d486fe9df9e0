-- Store one tool call's result (the first write wins) and its message event; the one caller
-- whose result completes the step's calls moves the task on and pushes the next step's job
-- (prelude's `store_result`). A worker that ran the call in a session's interpreter stamps
-- the last use on its sandbox record in the same write, keeping the record alive
-- (claim_session.lua), and records the interpreter cells the call ran (`doc.cells`: the
-- session keeps its last `keep`, services/tool_worker/cells.py). The call's claim is left to
-- lapse: the stored result answers any later claim first (claim_call.lua).
-- KEY: PutToolResultKeys
-- doc: PutToolResultDoc
-- Answers as `store_result` does (script_replies.ResultStoredReply).
local used = doc.used
if used then
  local sandbox, cells = unpack(KEY.interpreter)
  -- EXPIRE answers whether the record exists: a gone one is not made again.
  if redis.call('EXPIRE', sandbox, used.record_ttl_s) == 1 then
    redis.call('HSET', sandbox, 'last_used', used.at)
  end
  if doc.cells then
    -- RPUSH answers the length: trimmed only once past what the session keeps.
    if redis.call('RPUSH', cells, unpack(doc.cells.codes)) > doc.cells.keep then
      redis.call('LTRIM', cells, -doc.cells.keep, -1)
    end
    redis.call('EXPIRE', cells, doc.cells.ttl_s)
  end
end
return store_result(KEY.results, KEY.task, KEY.events, doc.step, doc.call_id, doc.message,
                    doc.ttl_s, doc.broker_db, doc.next_step)
