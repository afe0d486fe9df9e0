-- Claim a tool call for a worker to run, unless its task ended, its result is in or another
-- worker holds it (prelude's `claim_call`).
-- KEY: ClaimCallKeys
-- doc: ClaimCallDoc
-- Returns 'ended', 'done', 'busy' or 'claimed'.
return claim_call(KEY.task, KEY.results, KEY.claim, doc)
