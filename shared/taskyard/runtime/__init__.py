"""The task runtime: a task's record and states, the jobs that carry its steps, its
event stream, the Redis store and its scripts, and the service logic several services run
(submission, approvals, cancellation, webhooks, schedules)."""
