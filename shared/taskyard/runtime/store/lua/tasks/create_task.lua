-- Store a new task and take its session (pushing its first step's job), or queue it behind
-- the session's current task, its first step's job kept with it for the write that hands it
-- the session; an idempotency key already used returns the task it created.
-- While the session runs another task, the busy policy decides: 'enqueue' (wait its turn),
-- 'reject' (refused), 'interrupt' (that task ends cancelled, its committed steps kept, and
-- this one takes the session now) or 'rollback' (as interrupt, and the session is put back
-- as that task found it: `roll_back`).
-- KEY: CreateTaskKeys
-- doc: CreateTaskDoc
-- Answers (named: script_replies.CreateTaskReply) 'created' (`holds_session` 1 if it holds
-- the session, the task it `displaced` or ''), 'existing' (its `task_id`, `fingerprint`),
-- 'busy' (`task_id`: the session's task) or 'parent_ended'.
-- An answer for a task made before writes too (the same value again): a WAIT after this
-- script counts the replicas holding this connection's writes, and so then covers the
-- task's first write, made perhaps on another connection (`Tasks.create`'s `replicas`).
if redis.call('EXISTS', KEY.task) == 1 then  -- a retried call whose first try went through
  redis.call('HSET', KEY.task, 'id', doc.task_id)
  return named{outcome = 'created',
               holds_session = redis.call('GET', KEY.lock) == doc.task_id and 1 or 0,
               displaced = redis.call('HGET', KEY.task, 'displaced') or ''}
end
if doc.fingerprint ~= '' then
  local existing = redis.call('GET', KEY.idempotency)
  if existing then
    redis.call('SET', KEY.idempotency, existing, 'KEEPTTL')
    local space = string.find(existing, ' ', 1, true)
    return named{outcome = 'existing', task_id = string.sub(existing, 1, space - 1),
                 fingerprint = string.sub(existing, space + 1)}
  end
end
local parent = doc.parent_id
if parent ~= '' then  -- a child task: only while its parent lives, and the parent hears of it
  local parent_status = redis.call('HGET', TASK_PREFIX .. parent, 'status')
  if not parent_status or TERMINAL[parent_status] then return named{outcome = 'parent_ended'} end
  redis.call('SADD', string.format(CHILDREN_KEY, parent), doc.task_id)
  add_event(string.format(EVENTS_KEY, parent), 'child',
            cjson.encode({task_id = doc.task_id, status = 'queued'}))
end
-- The session is this task's if nobody holds it (SET ... NX GET answers the holder, setting
-- nothing then).
local holder, policy = redis.call('SET', KEY.lock, doc.task_id, 'NX', 'GET'), doc.busy
local taken = not holder
if policy == 'reject' and holder and holder ~= doc.task_id then
  return named{outcome = 'busy', task_id = holder}
end

-- The live holder ends cancelled, saying for which task (a rollback first puts the session
-- back, by the mark in the holder's hash; ended, it is never rolled back again).
local function displace(holder_id)
  local reason = (policy == 'rollback' and 'rolled back for task ' or 'interrupted by task ')
                 .. doc.task_id
  local key = TASK_PREFIX .. holder_id
  if policy == 'rollback' then roll_back(key, KEY.paths, KEY.values, KEY.compaction, KEY.epoch) end
  redis.call('HSET', key, 'status', 'cancelled', 'error', reason,
             'updated_at', string.format('%.6f', NOW))
  close_ended(key, 'cancelled', cjson.encode({status = 'cancelled', error = reason}),
              doc.broker_db, 'the agent\'s task ended cancelled: ' .. reason)
end

hset_fields(KEY.task, doc.fields)
local queued, displaced = doc.queued, ''
if holder and (policy == 'interrupt' or policy == 'rollback') then
  local status = redis.call('HGET', TASK_PREFIX .. holder, 'status')
  if status and not TERMINAL[status] then
    displace(holder)
    displaced = holder
    local said = {status = 'queued'}
    said[policy == 'rollback' and 'rolled_back' or 'interrupted'] = holder
    queued = cjson.encode(said)
    redis.call('HSET', KEY.task, 'displaced', holder)
  end
  holder = false  -- the session is this task's at once (a holder that ended needs it no more)
end
add_event(KEY.events, 'status', queued)
add_event(KEY.events, 'message', doc.asked)
notify(KEY.task, 'queued', doc.broker_db, doc.fields.webhook_events)
moved(KEY.task, doc.fields)
redis.call('ZADD', KEY.tenant_tasks, NOW, doc.task_id)
redis.call('ZADD', KEY.session_tasks, NOW, doc.task_id)
redis.call('ZADD', KEY.tenant_sessions, NOW, doc.fields.session_id)
if doc.fingerprint ~= '' then
  redis.call('SET', KEY.idempotency, doc.task_id .. ' ' .. doc.fingerprint, 'EX', doc.key_ttl_s)
end
if not holder then
  if not taken then redis.call('SET', KEY.lock, doc.task_id) end
  push_jobs(doc.broker_db, doc.first_step)
  return named{outcome = 'created', holds_session = 1, displaced = displaced}
end
-- Queued: its first step waits with it, pushed by the write that hands it the session.
local first = doc.first_step[1]
if first then
  redis.call('HSET', KEY.task, 'first_queue', first.queue, 'first_message', first.message)
end
redis.call('RPUSH', KEY.waiting, doc.task_id)
return named{outcome = 'created', holds_session = 0, displaced = ''}
