-- A tool worker's two claims before it runs a call, in one round trip: the session's
-- interpreter (`doc.session`, for a call that uses it: claim_session.lua), then, unless the
-- session's live holder is to run it ('forward'), the call itself (claim_call.lua).
-- KEY: ClaimRunKeys (`session`: the session's sandbox record, with `doc.session` only)
-- doc: ClaimRunDoc
-- Answers (named: script_replies.ClaimRunReply) the session's verdict, detail and handle
-- ('' without `doc.session`) and the call's claim ('' when forwarded).
local session = {verdict = '', detail = '', handle = ''}
if doc.session then
  session = claim_session(KEY.session[1], doc.session)
end
session.call = ''
if session.verdict ~= 'forward' then
  session.call = claim_call(KEY.task, KEY.results, KEY.claim, doc.call)
end
return named(session)
