-- Pass the session on from a task that holds it (or drop the task from the waiting list).
-- KEYS: session lock, session waiting list. ARGV: task id
return release_session(KEYS[1], KEYS[2], ARGV[1])
