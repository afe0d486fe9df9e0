-- Pass the session on from a task that holds it (or drop the task from the waiting list);
-- the next task's first step is pushed with it.
-- KEY: SessionKeys
-- doc: ReleaseSessionDoc
return release_session(KEY.lock, KEY.waiting, doc.task_id, doc.broker_db)
