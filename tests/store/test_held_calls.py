"""Calls held for approval in the store against a real Redis."""

from __future__ import annotations

import redis

from taskyard.plumbing import keys
from taskyard.runtime.store import TaskStore


async def test_a_call_held_in_an_earlier_step_is_known(
    store: TaskStore, redis_client: redis.Redis
) -> None:
    redis_client.hset(keys.task_approvals("task_x", 1), "c1", '{"state": "denied"}')
    assert await store.was_held("task_x", 3, "c1")  # its step is over, but it was held
    assert not await store.was_held("task_x", 1, "c1")  # only steps before the one given
    assert not await store.was_held("task_x", 3, "c2")
