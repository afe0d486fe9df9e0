-- Save the session's compaction, made by a step of a task, only while that task lives: a task
-- that ended meanwhile (cancelled, or rolled back for another) no longer holds the session.
-- The task's first marks the compaction it replaces, for a rollback (prelude's
-- `mark_compaction`).
-- KEY: SaveCompactionKeys
-- doc: SaveCompactionDoc
local t = hmget(KEY.task, {'status', BEFORE .. 'marked', BEFORE .. 'compacted'})
if not t.status or TERMINAL[t.status] then return 0 end
if t[BEFORE .. 'marked'] and not t[BEFORE .. 'compacted'] then
  mark_compaction(KEY.task, KEY.compaction)
end
redis.call('HSET', KEY.compaction, 'upto', doc.upto, 'summary', doc.summary)
return 1
