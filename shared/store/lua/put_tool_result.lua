-- Store one tool call's result (the first write wins) and its message event, and say whether
-- this result completed the step's calls; exactly one caller gets the advance claim. A worker
-- that claimed the call (claim_call.lua) frees its claim in the same write, and stamps the
-- last use on its session's sandbox record (claim_session.lua).
-- KEYS: results of the step, task, events, the step's advance claim, then optionally the
--       call's claim, the worker's claims set and the session's interpreter state
-- ARGV: step, call id, message JSON ('' only to check an earlier result), results ttl,
--       store db, broker db, the next step's queue and message (pushed by the caller that
--       completes the step), then with the claim keys the worker's name, the time of the
--       interpreter's use ('' if the call used none) and the record's lifetime (s)
if KEYS[5] then
  if redis.call('GET', KEYS[5]) == ARGV[9] then
    redis.call('DEL', KEYS[5])
    redis.call('SREM', KEYS[6], KEYS[5])
  end
  if ARGV[10] ~= '' and redis.call('EXISTS', KEYS[7]) == 1 then
    redis.call('HSET', KEYS[7], 'last_used', ARGV[10])
    redis.call('EXPIRE', KEYS[7], ARGV[11])
  end
end
return store_result(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[3], ARGV[4],
                    ARGV[5], ARGV[6], {ARGV[7], '', ARGV[8]})
