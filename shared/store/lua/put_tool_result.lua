-- Store one tool call's result (the first write wins) and its message event, and say whether
-- this result completed the step's calls; exactly one caller gets the advance claim.
-- KEYS: results of the step, task, events, the step's advance claim
-- ARGV: step, call id, message JSON ('' only to check an earlier result), results ttl,
--       store db, broker db, and the next step's queue and message (pushed by the caller
--       that completes the step)
return store_result(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[3], ARGV[4],
                    ARGV[5], ARGV[6], {ARGV[7], ARGV[8]})
