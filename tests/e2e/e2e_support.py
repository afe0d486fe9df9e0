"""Helpers the end-to-end tests share."""

from __future__ import annotations

import time

import httpx

from devstack.stack import LocalStack
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


def configure_model(stack: LocalStack, **config: object) -> None:
    """Change the stack's scripted model on the fly (`latency_ms`, ...: /scripted/config)."""
    url = f"{stack.model_url}/scripted/config"
    httpx.post(url, json=config, timeout=5).raise_for_status()
