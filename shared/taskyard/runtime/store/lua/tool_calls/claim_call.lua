-- Claim a tool call for a worker to run, unless its result is in or another worker holds it
-- (prelude's `claim_call`).
-- KEY: ClaimCallKeys
-- doc: ClaimCallDoc
-- Returns 'done', 'busy' or 'claimed'.
return claim_call(KEY.results, KEY.claim, KEY.worker_claims, doc)
