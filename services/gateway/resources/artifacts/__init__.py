"""A task's artifacts (`/v1/tasks/{task_id}/artifacts`): the files its tools made, served from
the artifact store."""
