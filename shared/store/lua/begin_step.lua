-- Start step ARGV[1] of a task: mark it running and read, in one round trip, what the step
-- needs: the task, the previous step's tool results, each memory's messages after the
-- offset the caller already holds (all of them if the session was rewritten meanwhile), and
-- the session's values (the agent tree's state that is not messages).
-- KEYS: task, events, previous step's results, session epoch, session values, memory lists...
-- ARGV: step, running event data, updated_at, cached epoch, '' (beside the values' key),
--       one offset per memory list, then the store db and the broker db
local fields = redis.call('HGETALL', KEYS[1])
if #fields == 0 then return {fields} end
local status = redis.call('HGET', KEYS[1], 'status')
if redis.call('HGET', KEYS[1], 'step') ~= ARGV[1] or TERMINAL[status] then return {fields} end
local began = '0'
if status ~= 'running' then
  redis.call('HSET', KEYS[1], 'status', 'running', 'updated_at', ARGV[3])
  add_event(KEYS[2], 'status', ARGV[2])
  tell_parent(KEYS[1], 'running')
  notify(KEYS[1], 'running', ARGV[#KEYS + 1], ARGV[#KEYS + 2])
  began = '1'
end
moved(KEYS[1])
local epoch = redis.call('GET', KEYS[4]) or '0'
local memories = {}
for i = 6, #KEYS do
  local offset = tonumber(ARGV[i])
  if epoch ~= ARGV[4] or offset > redis.call('LLEN', KEYS[i]) then offset = 0 end
  memories[#memories + 1] = {offset, redis.call('LRANGE', KEYS[i], offset, -1)}
end
return {fields, began, redis.call('HGETALL', KEYS[3]), epoch, memories,
        redis.call('HGETALL', KEYS[5])}
