-- Free the tool-call claims a worker (by its label) held, as it starts again; a claim that
-- lapsed and was taken by another worker since is left to it.
-- KEY: WorkerClaimsKeys
-- doc: ReleaseClaimsDoc
local freed = 0
for _, claim in ipairs(redis.call('SMEMBERS', KEY.worker_claims)) do
  if redis.call('GET', claim) == doc.worker then
    redis.call('DEL', claim)
    freed = freed + 1
  end
end
redis.call('DEL', KEY.worker_claims)
return freed
