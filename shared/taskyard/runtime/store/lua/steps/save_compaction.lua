-- Save the session's compaction, made by a step of a task, only while that task lives: a task
-- that ended meanwhile (cancelled, or rolled back for another) no longer holds the session.
-- KEY: SaveCompactionKeys
-- doc: SaveCompactionDoc
local status = redis.call('HGET', KEY.task, 'status')
if not status or TERMINAL[status] then return 0 end
redis.call('HSET', KEY.compaction, 'upto', doc.upto, 'summary', doc.summary)
return 1
