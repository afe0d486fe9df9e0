-- A tool worker about to run a call in a session's interpreter asks whether it holds it:
-- 'new' (nobody did: now this worker does), 'mine', 'forward' with the queue of the live
-- worker that holds it (the job goes there), or 'lost' with why the state the session had
-- is gone (now this worker holds it, fresh): its holder ended it (idle, evicted), stopped,
-- restarted or stopped answering.
-- KEYS: the session's sandbox record
-- ARGV: this worker's node name, incarnation, own queue, the record's lifetime (s)
local f = redis.call('HMGET', KEYS[1], 'node', 'incarnation', 'state', 'reason', 'queue',
                     'last_used')
local function take(verdict, why)
  redis.call('HSET', KEYS[1], 'node', ARGV[1], 'incarnation', ARGV[2], 'queue', ARGV[3],
             'state', 'live', 'reason', '')
  redis.call('EXPIRE', KEYS[1], ARGV[4])
  return {verdict, why}
end
if not f[1] then return take('new', '') end
local same_node, same_run = f[1] == ARGV[1], f[2] == ARGV[2]
if same_node and same_run and f[3] == 'live' then
  redis.call('EXPIRE', KEYS[1], ARGV[4])
  return {'mine', ''}
end
if f[3] ~= 'live' then return take('lost', f[4] or '') end
if not same_node and redis.call('GET', string.format(WORKER_ALIVE_KEY, f[1])) == f[2] then
  return {'forward', f[5]}
end
-- Its holder is gone: if no call ever finished in it, there was no state to lose.
if not f[6] then return take('new', '') end
if same_node then return take('lost', 'its tool worker ' .. f[1] .. ' restarted') end
return take('lost', 'its tool worker ' .. f[1] .. ' stopped answering: it was killed, or ' ..
            'its host is gone')
