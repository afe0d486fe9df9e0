"""Approvals (`/v1/tasks/{task_id}/approvals/{call_id}`): a person's decision on a call held
for it."""
