-- Store a new task and take its session (pushing its first step's job), or queue it behind
-- the session's current task, its first step's job kept with it for the write that hands it
-- the session; an idempotency key already used returns the task it created.
-- While the session runs another task, the busy policy decides: 'enqueue' (wait its turn),
-- 'reject' (refused), 'interrupt' (that task ends cancelled, its committed steps kept, and
-- this one takes the session now) or 'rollback' (as interrupt, and the session is put back
-- as that task found it: `roll_back`).
-- KEYS: task, events, session lock, session waiting list, idempotency key, the tenant's
--       task index, the session's task index, the tenant's session index, the session's
--       memory list names, its values, its compaction, its epoch
-- doc: CreateTaskDoc
-- Returns {'created', '1' if it holds the session, the task it displaced or ''}, or
-- {'existing', task id, fingerprint}, {'busy', the session's task} or {'parent_ended'}.
-- An answer for a task made before writes too (the same value again): a WAIT after this
-- script counts the replicas holding this connection's writes, and so then covers the
-- task's first write, made perhaps on another connection (`Tasks.create`'s `replicas`).
if redis.call('EXISTS', KEYS[1]) == 1 then  -- a retried call whose first try went through
  redis.call('HSET', KEYS[1], 'id', doc.task_id)
  return {'created', redis.call('GET', KEYS[3]) == doc.task_id and '1' or '0',
          redis.call('HGET', KEYS[1], 'displaced') or ''}
end
if doc.fingerprint ~= '' then
  local existing = redis.call('GET', KEYS[5])
  if existing then
    redis.call('SET', KEYS[5], existing, 'KEEPTTL')
    local space = string.find(existing, ' ', 1, true)
    return {'existing', string.sub(existing, 1, space - 1), string.sub(existing, space + 1)}
  end
end
local parent = doc.parent_id
if parent ~= '' then  -- a child task: only while its parent lives, and the parent hears of it
  local parent_status = redis.call('HGET', TASK_PREFIX .. parent, 'status')
  if not parent_status or TERMINAL[parent_status] then return {'parent_ended'} end
  redis.call('SADD', string.format(CHILDREN_KEY, parent), doc.task_id)
  add_event(string.format(EVENTS_KEY, parent), 'child',
            cjson.encode({task_id = doc.task_id, status = 'queued'}))
end
local holder, policy = redis.call('GET', KEYS[3]), doc.busy
if policy == 'reject' and holder and holder ~= doc.task_id then return {'busy', holder} end

-- The live holder ends cancelled, saying for which task (a rollback first puts the session
-- back: the mark it reads goes with the task's end).
local function displace(holder_id)
  local reason = (policy == 'rollback' and 'rolled back for task ' or 'interrupted by task ')
                 .. doc.task_id
  if policy == 'rollback' then
    roll_back(string.format(SESSION_BEFORE_KEY, holder_id), KEYS[9], KEYS[10], KEYS[11], KEYS[12])
  end
  local key = TASK_PREFIX .. holder_id
  redis.call('HSET', key, 'status', 'cancelled', 'error', reason,
             'updated_at', string.format('%.6f', now()))
  close_ended(key, 'cancelled', cjson.encode({status = 'cancelled', error = reason}),
              doc.store_db, doc.broker_db, 'the agent\'s task ended cancelled: ' .. reason)
end

hset_fields(KEYS[1], doc.fields)
local queued, displaced = doc.queued, ''
if holder and (policy == 'interrupt' or policy == 'rollback') then
  local status = redis.call('HGET', TASK_PREFIX .. holder, 'status')
  if status and not TERMINAL[status] then
    displace(holder)
    displaced = holder
    local said = {status = 'queued'}
    said[policy == 'rollback' and 'rolled_back' or 'interrupted'] = holder
    queued = cjson.encode(said)
    redis.call('HSET', KEYS[1], 'displaced', holder)
  end
  holder = false  -- the session is this task's at once (a holder that ended needs it no more)
end
add_event(KEYS[2], 'status', queued)
add_event(KEYS[2], 'message', doc.asked)
notify(KEYS[1], 'queued', doc.store_db, doc.broker_db)
moved(KEYS[1])
local created = now()
redis.call('ZADD', DEADLINES, created + doc.deadline_s, doc.task_id)
redis.call('ZADD', KEYS[6], created, doc.task_id)
redis.call('ZADD', KEYS[7], created, doc.task_id)
redis.call('ZADD', KEYS[8], created, redis.call('HGET', KEYS[1], 'session_id'))
if doc.fingerprint ~= '' then
  redis.call('SET', KEYS[5], doc.task_id .. ' ' .. doc.fingerprint, 'EX', doc.key_ttl_s)
end
if not holder then
  redis.call('SET', KEYS[3], doc.task_id)
  push_jobs(doc.store_db, doc.broker_db, doc.first_step)
  return {'created', '1', displaced}
end
-- Queued: its first step waits with it, pushed by the write that hands it the session.
local first = doc.first_step[1]
if first then
  redis.call('HSET', KEYS[1], 'first_queue', first.queue, 'first_message', first.message)
end
redis.call('RPUSH', KEYS[4], doc.task_id)
return {'created', '0', ''}
