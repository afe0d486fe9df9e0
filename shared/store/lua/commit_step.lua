-- Apply one agent step exactly once: memory appends, session values, message events, the
-- task's new state, token usage and the status event; an ending step passes the session on.
-- KEYS: task, events, session lock, session waiting list, the session's memory list names,
--       the step's approvals, the session's values, memory lists...
-- ARGV: step, task id, new status, '1' if it ends the task, status event data,
--       prompt tokens, completion tokens, store db, broker db, then counted groups:
--       n + field pairs, n + events (kind, data pairs), per memory list n + messages,
--       n + changed session values (path, JSON pairs), n + the jobs it starts (queue,
--       sticky session, message triples), n + the calls held for approval (call id, state JSON pairs), and the
--       approvals' timeout in seconds ('' for none)
local status = redis.call('HGET', KEYS[1], 'status')
if not status or redis.call('HGET', KEYS[1], 'step') ~= ARGV[1] or TERMINAL[status] then
  return {'conflict', ''}
end
local i = 10
local n = tonumber(ARGV[i])
local mapping = {'step', tostring(tonumber(ARGV[1]) + 1), 'status', ARGV[3]}
for j = 1, n do mapping[#mapping + 1] = ARGV[i + j] end
i = i + n + 1
n = tonumber(ARGV[i])
for j = 1, n, 2 do add_event(KEYS[2], ARGV[i + j], ARGV[i + j + 1]) end
i = i + n + 1
for k = 8, #KEYS do
  n = tonumber(ARGV[i])
  if n > 0 then
    redis.call('RPUSH', KEYS[k], unpack(ARGV, i + 1, i + n))
    redis.call('SADD', KEYS[5], KEYS[k])
  end
  i = i + n + 1
end
n = tonumber(ARGV[i])
if n > 0 then redis.call('HSET', KEYS[7], unpack(ARGV, i + 1, i + n)) end
i = i + n + 1
n = tonumber(ARGV[i])
push_jobs(ARGV[8], ARGV[9], {unpack(ARGV, i + 1, i + n)})
i = i + n + 1
n = tonumber(ARGV[i])
local task_id, timeout = task_id_of(KEYS[1]), ARGV[i + n + 1]
for j = 1, n, 2 do
  redis.call('HSET', KEYS[6], ARGV[i + j], ARGV[i + j + 1])
  if timeout ~= '' then
    local member = task_id .. '|' .. ARGV[1] .. '|' .. ARGV[i + j]
    redis.call('ZADD', APPROVAL_DEADLINES, now() + tonumber(timeout), member)
  end
end
redis.call('HSET', KEYS[1], unpack(mapping))
redis.call('HINCRBY', KEYS[1], 'prompt_tokens', ARGV[6])
redis.call('HINCRBY', KEYS[1], 'completion_tokens', ARGV[7])
-- A child's tokens count toward every ancestor's budget too.
for _, ancestor in ipairs(cjson.decode(redis.call('HGET', KEYS[1], 'ancestors') or '[]')) do
  redis.call('HINCRBY', TASK_PREFIX .. ancestor, 'prompt_tokens', ARGV[6])
  redis.call('HINCRBY', TASK_PREFIX .. ancestor, 'completion_tokens', ARGV[7])
end
add_event(KEYS[2], 'status', ARGV[5])
tell_parent(KEYS[1], ARGV[3])
notify(KEYS[1], ARGV[3], ARGV[8], ARGV[9])
if ARGV[4] == '1' then
  ended(KEYS[1])
  deliver_to_parent(KEYS[1], ARGV[8], ARGV[9], redis.call('HGET', KEYS[1], 'result') or '', nil)
  return {'committed', release_session(KEYS[3], KEYS[4], ARGV[2], ARGV[8], ARGV[9])}
end
moved(KEYS[1])
return {'committed', ''}
