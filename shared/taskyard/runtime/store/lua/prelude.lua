-- Shared by every script (prepended when the scripts are loaded). Each script is called with
-- its keys in KEYS, read by name as `KEY` (named in shared/taskyard/runtime/store/script_keys.py),
-- one JSON document in ARGV[1], read by name as `doc` (the documents are typed in
-- documents.py there), and the caller's clock in ARGV[2] (`NOW`). An answer of several
-- values goes back by name too: `named`.
local doc = cjson.decode(ARGV[1])
local TERMINAL = {succeeded = true, failed = true, cancelled = true, timed_out = true}

-- Live tasks by when the sweep is to look at them (see `moved`); names filled in from
-- shared/taskyard/plumbing/keys.py when the scripts load.
local LIVE, TASK_PREFIX = '{live}', '{task_prefix}'
local APPROVAL_DEADLINES = '{approval_deadlines}'
local RESULTS_KEY = '{results_key}'
local EVENTS_KEY, CHILDREN_KEY = '{events_key}', '{children_key}'
local WEBHOOKS_DUE = '{webhooks_due}'
local SANDBOX_KEY, WORKER_ALIVE_KEY = '{sandbox_key}', '{worker_alive_key}'
local SANDBOX_HOST_KEY = '{sandbox_host_key}'

-- An answer {name = value, ...} as a flat name, value list (a Lua table with names reaches the
-- client empty), decoded by name in script_replies.py. No value may be nil or false: Redis
-- would drop or null it.
local function named(answer)
  local flat = {}
  for name, value in pairs(answer) do
    flat[#flat + 1] = name
    flat[#flat + 1] = value
  end
  return flat
end

-- The caller's clock as it called (ARGV[2], `ScriptedStore.script`): a script runs at one
-- instant, and its times are of the clock that stamps the task's `updated_at` and that the
-- sweep compares them with (no TIME: a command per script saved).
local NOW = tonumber(ARGV[2])

local function task_id_of(task_key)
  return string.sub(task_key, #TASK_PREFIX + 1)
end

-- The task's fields `moved` reads (create_task.lua writes them; one missing counts as none),
-- and `names` with them, for a script's one read of the task.
local MOVED = {'created_at', 'deadline_s', 'stall_s'}

local function and_moved(names)
  for _, name in ipairs(MOVED) do names[#names + 1] = name end
  return names
end

-- The task (`t`: its MOVED fields) moved now: the sweep is to look at it once it has stood
-- still for its `stall_s`, or at its deadline if that comes first (one index for both, so one
-- write a move and one at the end).
local function moved(task_key, t)
  local look = NOW + (tonumber(t.stall_s) or 0)
  local deadline = tonumber(t.created_at) and tonumber(t.deadline_s)
  if deadline then look = math.min(look, tonumber(t.created_at) + deadline) end
  redis.call('ZADD', LIVE, look, task_id_of(task_key))
end

local function ended(task_key)
  redis.call('ZREM', LIVE, task_id_of(task_key))
end

-- Set a hash's fields from a document's {name = value} object, after the `first` name,
-- value pairs (if any), in one HSET (none for nothing to set).
local function hset_fields(key, fields, first)
  local flat = first or {}
  for name, value in pairs(fields) do
    flat[#flat + 1] = name
    flat[#flat + 1] = value
  end
  if #flat > 0 then redis.call('HSET', key, unpack(flat)) end
end

-- A hash's fields `names` as a {name = value} table (an absent one nil), in one HMGET.
local function hmget(key, names)
  local values, found = redis.call('HMGET', key, unpack(names)), {}
  for i, name in ipairs(names) do found[name] = values[i] or nil end
  return found
end

-- Which of a task's fields say who hears of its changes (`tell_parent`, `notify`).
local TOLD = {'parent_id', 'webhook_events'}

local function add_event(events, kind, data)
  return redis.call('XADD', events, '*', 'kind', kind, 'data', data)
end

-- The queue of the tool worker holding the session's interpreter (or chosen to take it over:
-- 'handed') while that worker lives (its heartbeat key holds the incarnation the record
-- names), else nil.
local function owner_queue(session_key)
  if session_key == '' then return nil end
  local f = redis.call('HMGET', string.format(SANDBOX_KEY, session_key),
                       'node', 'incarnation', 'state', 'queue')
  if not f[1] or (f[3] ~= 'live' and f[3] ~= 'handed') then return nil end
  if redis.call('GET', string.format(WORKER_ALIVE_KEY, f[1])) ~= f[2] then return nil end
  return f[4]
end

-- Push jobs ({queue = list, sticky = session key or '', message = kombu's JSON}) onto the
-- broker's database as the script ends (`flush_jobs`, run after every script's body: one
-- SELECT for all its jobs, none back, as the store is not touched after; none at all with
-- the broker on the store's database, the default): the commit and the jobs it starts are
-- one atomic write. A job bound to a session's interpreter goes to the
-- queue of the worker holding it, if one does; its message keeps the pool queue as routing
-- key, where kombu restores it should it be taken and not acknowledged.
local pushes, broker = {}, nil
local function push_jobs(broker_db, jobs)
  for _, job in ipairs(jobs) do
    pushes[#pushes + 1] = {owner_queue(job.sticky) or job.queue, job.message}
    broker = broker_db
  end
end

local function flush_jobs()
  if #pushes == 0 then return end
  if broker ~= doc.store_db then redis.call('SELECT', broker) end
  for _, push in ipairs(pushes) do redis.call('LPUSH', push[1], push[2]) end
end

local function one_job(queue, message)
  return {queue = queue, sticky = '', message = message}
end

-- Pass the session on: the next waiting task takes the lock, its first step's job (stored
-- with it as it was queued) goes to the broker in the same write, and its id is returned; a
-- task that does not hold the lock only leaves the waiting list.
local function give_session(lock, following, broker_db)
  redis.call('SET', lock, following)
  local key = TASK_PREFIX .. following
  local first = redis.call('HMGET', key, 'first_queue', 'first_message')
  if first[2] then
    push_jobs(broker_db, {one_job(first[1], first[2])})
    redis.call('HDEL', key, 'first_queue', 'first_message')
  end
end

local function release_session(lock, waiting, task_id, broker_db)
  if redis.call('GET', lock) ~= task_id then
    redis.call('LREM', waiting, 0, task_id)
    return ''
  end
  local following = redis.call('LPOP', waiting)
  if following then
    give_session(lock, following, broker_db)
    return following
  end
  redis.call('DEL', lock)
  return ''
end

-- A child task (an agent offered as a tool) tells its parent (`parent`: its id, nil for a
-- task that is no child) how it stands.
local function tell_parent(task_key, status, parent)
  if parent then
    local data = cjson.encode({task_id = task_id_of(task_key), status = status})
    add_event(string.format(EVENTS_KEY, parent), 'child', data)
  end
end

-- Tell the task's webhook of a state change it subscribed to (`subscribed`: the task's
-- webhook_events, nil for none): push its delivery job, with ids of its own (each push is a
-- message of its own to the broker), and mark the task due for the sweep in two minutes
-- should that job be lost (the job pushes the mark on).
local function notify(task_key, status, broker_db, subscribed)
  if not subscribed or not string.find(subscribed, ',' .. status .. ',', 1, true) then return end
  local f = redis.call('HMGET', task_key, 'webhook_queue', 'webhook_message')
  local task_id = task_id_of(task_key)
  redis.call('ZADD', WEBHOOKS_DUE, 'NX', NOW + 120, task_id)
  local message = cjson.decode(f[2])
  local tag = task_id .. '.' .. status .. '.' .. string.format('%.6f', NOW)
  message['headers']['id'] = tag
  message['headers']['root_id'] = tag
  message['properties']['correlation_id'] = tag
  message['properties']['delivery_tag'] = tag
  push_jobs(broker_db, {one_job(f[1], cjson.encode(message))})
end

-- Store one tool call's result (the first write wins) with its message event; the one caller
-- whose result completes the step's calls moves the task to running (its status event, its
-- parent and webhook told, as a step's begin would) and pushes `next_jobs`: a task no longer
-- waiting is completed by nobody again. Answers (named) its outcome: 'ended' (the task is
-- over), 'stored' or 'advanced' (that caller).
local WAITING = {waiting_tools = true, waiting_approval = true}

local function store_result(results, task, events, step, call_id, message, ttl, broker_db,
                            next_jobs)
  local f = hmget(task, and_moved({'status', 'step', 'pending_calls', 'parent_id',
                                    'webhook_events'}))
  local status = f.status
  if not status or TERMINAL[status] then return named{outcome = 'ended'} end
  if message ~= '' and redis.call('HSETNX', results, call_id, message) == 1 then
    redis.call('EXPIRE', results, ttl)
    add_event(events, 'message', message)
    moved(task, f)
  end
  if not WAITING[status] or f.step ~= tostring(tonumber(step) + 1) then
    return named{outcome = 'stored'}
  end
  for _, call in ipairs(cjson.decode(f.pending_calls or '[]')) do
    local given = message ~= '' and call['id'] == call_id  -- in: stored now, or before
    if not given and redis.call('HEXISTS', results, call['id']) == 0 then
      return named{outcome = 'stored'}
    end
  end
  redis.call('HSET', task, 'status', 'running', 'updated_at', string.format('%.6f', NOW))
  add_event(events, 'status', cjson.encode({status = 'running'}))
  tell_parent(task, 'running', f.parent_id)
  notify(task, 'running', broker_db, f.webhook_events)
  push_jobs(broker_db, next_jobs)
  return named{outcome = 'advanced'}
end

-- A child task that ended hands its answer (or why it has none) to its parent's call, as
-- that call's result; the result completing the parent's step pushes its next step.
local function deliver_to_parent(task_key, broker_db, answer, failure)
  local f = redis.call('HMGET', task_key, 'parent_id', 'parent_step', 'parent_call_id',
                       'parent_result', 'parent_next_queue', 'parent_next_message')
  if not f[1] then return end
  local message = cjson.decode(f[4])
  if failure then
    message['content']['errmsg'] = failure
    message['content']['state'] = -1002
  else
    message['content']['result'] = {{type = 'text', content = answer}}
  end
  store_result(string.format(RESULTS_KEY, f[1], f[2]), TASK_PREFIX .. f[1],
               string.format(EVENTS_KEY, f[1]), f[2], f[3], cjson.encode(message), 604800,
               broker_db, {one_job(f[5], f[6])})
end

-- Close a task whose status was just set to a final one: its status event, out of the
-- sweep's view, its parent and webhook told, a child's end handed to its parent's call.
local function close_ended(task_key, status, data, broker_db, why)
  add_event(string.format(EVENTS_KEY, task_id_of(task_key)), 'status', data)
  ended(task_key)
  local told = hmget(task_key, TOLD)
  tell_parent(task_key, status, told.parent_id)
  notify(task_key, status, broker_db, told.webhook_events)
  if told.parent_id then deliver_to_parent(task_key, broker_db, nil, why) end
end

-- What a task found in its session as it began, for a rollback, kept as fields of the task's
-- own hash under a prefix no other field uses (BEFORE): 'before:marked', each memory list's
-- length ('before:len:<list>') and the session's values ('before:value:<path>'; `values`:
-- that hash as the caller read it, HGETALL's flat list). A task only appends to the lists and
-- rewrites the values and the compaction, so these are enough to put the session back, with
-- the compaction marked as the task first replaces it (`mark_compaction`): most tasks never
-- do. The fields go onto `fields`, for the caller's one HSET of the task; `lengths`
-- ({list = length}) are those the caller read anyway, any other list of the session's is
-- counted here.
local BEFORE = 'before:'

local function add_marks(fields, kind, found)
  for j = 1, #found, 2 do
    fields[#fields + 1] = BEFORE .. kind .. ':' .. found[j]
    fields[#fields + 1] = found[j + 1]
  end
end

local function mark_session(fields, paths, lengths, values)
  fields[#fields + 1] = BEFORE .. 'marked'
  fields[#fields + 1] = '1'
  for _, list in ipairs(redis.call('SMEMBERS', paths)) do
    fields[#fields + 1] = BEFORE .. 'len:' .. list
    fields[#fields + 1] = lengths[list] or redis.call('LLEN', list)
  end
  add_marks(fields, 'value', values)
end

-- The session's compaction as the task found it ('before:compacted', then
-- 'before:compaction:<field>'), marked once, as the task's first compaction replaces it.
local function mark_compaction(task_key, compaction_key)
  local fields = {BEFORE .. 'compacted', '1'}
  add_marks(fields, 'compaction', redis.call('HGETALL', compaction_key))
  redis.call('HSET', task_key, unpack(fields))
end

-- Put the session back as `mark_session` found it (the mark read from the task's hash,
-- `task_key`): each memory list cut to its length then (a list made since, gone), the values
-- and (if the task replaced it) the compaction as they were; the epoch moves on, so workers
-- holding a warm copy read it afresh. A task that never began changed nothing. Only a live
-- task is rolled back: an ended one's mark, left in its hash, is never read again.
local function roll_back(task_key, paths, values, compaction, epoch)
  local task = redis.call('HGETALL', task_key)
  local marked, compacted, lengths = false, false, {}
  local restored = {[values] = {}, [compaction] = {}}
  for j = 1, #task, 2 do
    local kind, name = string.match(task[j], '^' .. BEFORE .. '(%a+):(.*)$')
    local into = (kind == 'value' and restored[values]) or
                 (kind == 'compaction' and restored[compaction]) or nil
    if kind == 'len' then lengths[name] = tonumber(task[j + 1]) end
    if into then into[#into + 1] = name; into[#into + 1] = task[j + 1] end
    marked = marked or task[j] == BEFORE .. 'marked'
    compacted = compacted or task[j] == BEFORE .. 'compacted'
  end
  if not marked then return end
  if not compacted then restored[compaction] = nil end  -- the task left it as it found it
  for _, list in ipairs(redis.call('SMEMBERS', paths)) do
    local length = lengths[list]
    if not length then redis.call('SREM', paths, list) end
    if (length or 0) == 0 then
      redis.call('DEL', list)
    else
      redis.call('LTRIM', list, 0, length - 1)
    end
  end
  for key, fields in pairs(restored) do
    redis.call('DEL', key)
    if #fields > 0 then redis.call('HSET', key, unpack(fields)) end
  end
  redis.call('INCR', epoch)
end

-- A tool worker's claims before it runs a call (claim_session.lua, claim_call.lua, both in one
-- trip: claim_run.lua).

-- The session's interpreter, for the worker `d` (ClaimSessionDoc) about to use it: its verdict
-- {verdict, detail, handle} as claim_session.lua tells.
local function claim_session(record, d)
  local f = redis.call('HMGET', record, 'node', 'incarnation', 'state', 'reason', 'queue',
                       'last_used', 'sandbox')
  local function take(verdict, why, handle)
    redis.call('HSET', record, 'node', d.node, 'incarnation', d.incarnation,
               'queue', d.queue, 'state', 'live', 'reason', '', 'sandbox', handle or '')
    redis.call('EXPIRE', record, d.record_ttl_s)
    return {verdict = verdict, detail = why, handle = handle or ''}
  end
  local function forward(queue)
    return {verdict = 'forward', detail = queue, handle = ''}
  end
  -- A handle naming a session on a container of several ('<host>#<key>') is taken over by the
  -- one worker holding that container: the first to adopt one of its sessions, or the one its
  -- leaving worker chose. Another live holder gets the call (and the session) instead: nil
  -- when this worker may adopt it, else the forward.
  local function held_elsewhere(handle)
    local host = string.match(handle, '^(.*)#')
    if not host then return nil end
    local host_key = string.format(SANDBOX_HOST_KEY, host)
    local h = redis.call('HMGET', host_key, 'node', 'incarnation', 'queue')
    local mine = h[1] == d.node and h[2] == d.incarnation
    if h[1] and not mine and redis.call('GET', string.format(WORKER_ALIVE_KEY, h[1])) == h[2] then
      redis.call('HSET', record, 'state', 'handed', 'node', h[1], 'incarnation', h[2],
                 'queue', h[3])
      return forward(h[3])
    end
    redis.call('HSET', host_key, 'node', d.node, 'incarnation', d.incarnation,
               'queue', d.queue)
    redis.call('EXPIRE', host_key, d.record_ttl_s)
    return nil
  end
  if not f[1] then return take('new', '') end
  local same_node, same_run = f[1] == d.node, f[2] == d.incarnation
  if same_node and same_run and f[3] == 'live' then
    if d.keep_alive then redis.call('EXPIRE', record, d.record_ttl_s) end
    return {verdict = 'mine', detail = '', handle = ''}
  end
  -- Read only past 'mine', every call's case: a worker asking is alive.
  local holder_lives = redis.call('GET', string.format(WORKER_ALIVE_KEY, f[1])) == f[2]
  -- Handed over to the worker it names (or, parked, to none in particular): taken over here
  -- if it runs where this worker's sandboxes run, unless it waits for another live worker.
  if f[3] == 'handed' or f[3] == 'parked' then
    if f[3] == 'handed' and not same_node and holder_lives then return forward(f[5]) end
    local handle, place = f[7] or '', d.place
    if place ~= '' and string.sub(handle, 1, #place + 1) == place .. '/' then
      return held_elsewhere(handle) or take('adopt', f[4] or '', handle)
    end
    return take('lost', (f[4] or '') .. ', and no tool worker where its interpreter runs ' ..
                'took it over')
  end
  if f[3] ~= 'live' then return take('lost', f[4] or '') end
  if not same_node and holder_lives then return forward(f[5]) end
  -- Its holder is gone: if no call ever finished in it, there was no state to lose.
  if not f[6] then return take('new', '') end
  if same_node then return take('lost', 'its tool worker ' .. f[1] .. ' restarted') end
  return take('lost', 'its tool worker ' .. f[1] .. ' stopped answering: it was killed, or ' ..
              'its host is gone')
end

-- The call, for the worker `d` (ClaimCallDoc: its node and this run of it) to run, unless its
-- task ended ('ended'), its result is in ('done') or a live worker holds it ('busy'):
-- 'claimed'. A claim names the run that took it, so one of a worker whose heartbeat lapsed
-- (killed, host gone) or that started again since holds nothing back. A stored result does not
-- free its call's claim: 'done' is answered first, and the claim lapses on its own.
local function claim_call(task, results, claim, d)
  -- Cancelled while the job waited in its queue, say.
  if TERMINAL[redis.call('HGET', task, 'status')] then return 'ended' end
  if redis.call('HEXISTS', results, d.call_id) == 1 then return 'done' end
  -- Taken at once unless held (SET ... NX GET answers the holder, setting nothing then).
  local held = redis.call('SET', claim, d.worker .. ' ' .. d.incarnation, 'NX', 'GET',
                          'PX', d.ttl_ms)
  if not held then return 'claimed' end
  local node, run = string.match(held, '^(.*) (%S*)$')
  if node and redis.call('GET', string.format(WORKER_ALIVE_KEY, node)) == run then
    return 'busy'
  end
  redis.call('SET', claim, d.worker .. ' ' .. d.incarnation, 'PX', d.ttl_ms)
  return 'claimed'
end
