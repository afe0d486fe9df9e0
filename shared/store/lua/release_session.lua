-- Pass the session on from a task that holds it (or drop the task from the waiting list).
-- The next task's first step is pushed with it.
-- KEYS: session lock, session waiting list. ARGV: task id, store db, broker db
return release_session(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])
