"""Helpers the end-to-end tests share."""

from __future__ import annotations

import time

from shared.client import TaskyardClient

ENDED = frozenset({"succeeded", "failed"})


def wait_status(
    client: TaskyardClient,
    task_id: str,
    statuses: frozenset[str] | set[str] = ENDED,
    timeout: float = 60,
) -> dict:
    """Poll the task until it is in one of `statuses`; fail (not hang) after `timeout`."""
    deadline = time.monotonic() + timeout
    while (task := client.get(task_id))["status"] not in statuses:
        assert time.monotonic() < deadline, f"task {task_id} never reached {statuses}: {task}"
        time.sleep(0.1)
    return task
