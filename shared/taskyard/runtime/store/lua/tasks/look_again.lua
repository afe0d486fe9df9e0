-- The sweep re-drove a stalled task: it is looked at again as if it had moved now (prelude's
-- `moved`: after its own stall_s, or at its deadline if sooner), unless it ended meanwhile.
-- KEY: LiveTaskKeys
local t = hmget(KEY.task, and_moved({'status'}))
if t.status and not TERMINAL[t.status] then moved(KEY.task, t) end
return 0
