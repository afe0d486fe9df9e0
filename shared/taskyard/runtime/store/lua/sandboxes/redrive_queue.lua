-- Move the jobs waiting on a gone tool worker's own queue to the pool queues they came from
-- (each message's routing key; `fallback` for one that names the dead queue itself), oldest
-- first, at most `limit`; returns how many moved and how many are left.
-- KEY: WorkerQueueKeys
-- doc: RedriveQueueDoc
redis.call('SELECT', doc.broker_db)
local moved = 0
while moved < doc.limit do
  local message = redis.call('RPOP', KEY.queue)
  if not message then break end
  local target = cjson.decode(message)['properties']['delivery_info']['routing_key']
  if target == KEY.queue or not target then target = doc.fallback end
  redis.call('LPUSH', target, message)
  moved = moved + 1
end
local left = redis.call('LLEN', KEY.queue)
redis.call('SELECT', doc.store_db)
return named{moved = moved, left = left}
