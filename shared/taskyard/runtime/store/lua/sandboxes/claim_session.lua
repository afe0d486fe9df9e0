-- A tool worker about to run a call in a session's interpreter asks whether it holds it:
-- 'new' (nobody did: now this worker does), 'mine', 'forward' with the queue of the live
-- worker that holds it (the job goes there), 'adopt' with the handle of the interpreter a
-- worker stopping on purpose handed over (now this worker holds it: it takes the running
-- interpreter over, state and all; the reason is what the model reads if that fails), or
-- 'lost' with why the state the session had is gone (now this worker holds it, fresh): its
-- holder ended it (idle, evicted), stopped, restarted or stopped answering.
-- KEY: SandboxKeys
-- doc: ClaimSessionDoc (`place`: where its sandboxes run, '' where it can take none over:
--      see SandboxProvider.place)
local f = redis.call('HMGET', KEY.record, 'node', 'incarnation', 'state', 'reason', 'queue',
                     'last_used', 'sandbox')
local function take(verdict, why, handle)
  redis.call('HSET', KEY.record, 'node', doc.node, 'incarnation', doc.incarnation,
             'queue', doc.queue, 'state', 'live', 'reason', '', 'sandbox', handle or '')
  redis.call('EXPIRE', KEY.record, doc.record_ttl_s)
  return named{verdict = verdict, detail = why, handle = handle or ''}
end
local function forward(queue)
  return named{verdict = 'forward', detail = queue, handle = ''}
end
-- A handle naming a session on a container of several ('<host>#<key>') is taken over by the
-- one worker holding that container: the first to adopt one of its sessions, or the one its
-- leaving worker chose. Another live holder gets the call (and the session) instead: nil when
-- this worker may adopt it, else the forward.
local function held_elsewhere(handle)
  local host = string.match(handle, '^(.*)#')
  if not host then return nil end
  local host_key = string.format(SANDBOX_HOST_KEY, host)
  local h = redis.call('HMGET', host_key, 'node', 'incarnation', 'queue')
  local mine = h[1] == doc.node and h[2] == doc.incarnation
  if h[1] and not mine and redis.call('GET', string.format(WORKER_ALIVE_KEY, h[1])) == h[2] then
    redis.call('HSET', KEY.record, 'state', 'handed', 'node', h[1], 'incarnation', h[2],
               'queue', h[3])
    return forward(h[3])
  end
  redis.call('HSET', host_key, 'node', doc.node, 'incarnation', doc.incarnation,
             'queue', doc.queue)
  redis.call('EXPIRE', host_key, doc.record_ttl_s)
  return nil
end
if not f[1] then return take('new', '') end
local same_node, same_run = f[1] == doc.node, f[2] == doc.incarnation
if same_node and same_run and f[3] == 'live' then
  redis.call('EXPIRE', KEY.record, doc.record_ttl_s)
  return named{verdict = 'mine', detail = '', handle = ''}
end
-- Read only past 'mine', every call's case: a worker asking is alive.
local holder_lives = redis.call('GET', string.format(WORKER_ALIVE_KEY, f[1])) == f[2]
-- Handed over to the worker it names (or, parked, to none in particular): taken over here if
-- it runs where this worker's sandboxes run, unless it waits for another live worker.
if f[3] == 'handed' or f[3] == 'parked' then
  if f[3] == 'handed' and not same_node and holder_lives then return forward(f[5]) end
  local handle, place = f[7] or '', doc.place
  if place ~= '' and string.sub(handle, 1, #place + 1) == place .. '/' then
    return held_elsewhere(handle) or take('adopt', f[4] or '', handle)
  end
  return take('lost', (f[4] or '') .. ', and no tool worker where its interpreter runs took ' ..
              'it over')
end
if f[3] ~= 'live' then return take('lost', f[4] or '') end
if not same_node and holder_lives then return forward(f[5]) end
-- Its holder is gone: if no call ever finished in it, there was no state to lose.
if not f[6] then return take('new', '') end
if same_node then return take('lost', 'its tool worker ' .. f[1] .. ' restarted') end
return take('lost', 'its tool worker ' .. f[1] .. ' stopped answering: it was killed, or ' ..
            'its host is gone')
