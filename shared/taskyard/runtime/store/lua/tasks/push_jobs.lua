-- Push jobs from outside any other write (the sweep's re-sends, a tool worker forwarding a
-- job to the worker that holds its session, the gateway's file requests), routed as the
-- commits route theirs.
-- doc: PushJobsDoc
push_jobs(doc.broker_db, doc.jobs)
return 1
