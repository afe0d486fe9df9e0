-- Pass the session on from a task that holds it (or drop the task from the waiting list);
-- the next task's first step is pushed with it.
-- KEYS: session lock, session waiting list
-- doc: ReleaseSessionDoc
return release_session(KEYS[1], KEYS[2], doc.task_id, doc.store_db, doc.broker_db)
