"""What Redis keeps of a task's webhook deliveries: the cursor (the last event of its stream
looked at), one record per delivered event (attempts, next try, outcome), and the due index
(`WEBHOOKS_DUE`, scored by when to look at the task again), which the sweep reads."""

from __future__ import annotations

from typing import Any

import orjson

from taskyard.plumbing import keys
from taskyard.runtime.store import TaskStore, redis_replies

__all__ = ["advance", "clear_due", "cursor", "deliveries", "due", "entry", "mark_due", "record"]

# How long a task handed out by `due` waits before it is handed out again: its job moves the
# mark on, so only a lost job lets it come back.
_GRACE_S = 120


async def cursor(store: TaskStore, task_id: str) -> str:
    """The last event looked at ("-": none yet, start from the first)."""
    return redis_replies.text(await store.r.get(keys.task_webhook_cursor(task_id))) or "-"


async def advance(store: TaskStore, task_id: str, event_id: str) -> None:
    """Move the cursor past `event_id`: done with it."""
    await store.r.set(keys.task_webhook_cursor(task_id), event_id)


async def entry(store: TaskStore, task_id: str, event_id: str) -> dict[str, Any] | None:
    """The event's delivery record, if it was tried."""
    found = await store.r.hget(keys.task_webhook_deliveries(task_id), event_id)
    return orjson.loads(found) if found else None


async def record(store: TaskStore, task_id: str, delivered: dict[str, Any]) -> None:
    """Keep `delivered` as the record of its event (`event_id`)."""
    key = keys.task_webhook_deliveries(task_id)
    await store.r.hset(key, delivered["event_id"], orjson.dumps(delivered))


async def deliveries(store: TaskStore, task_id: str) -> list[dict[str, Any]]:
    """The task's webhook deliveries so far, oldest event first."""
    found = await store.r.hgetall(keys.task_webhook_deliveries(task_id))
    entries = [orjson.loads(v) for v in found.values()]
    return sorted(entries, key=lambda e: tuple(map(int, e["event_id"].split("-"))))


async def mark_due(store: TaskStore, task_id: str, at: float) -> None:
    """Look at the task's events again at `at` (a timestamp)."""
    await store.r.zadd(keys.WEBHOOKS_DUE, {task_id: at})


async def clear_due(store: TaskStore, task_id: str) -> None:
    """Nothing of the task is pending: take it off the due index."""
    await store.r.zrem(keys.WEBHOOKS_DUE, task_id)


async def due(store: TaskStore, now: float, limit: int = 500) -> list[str]:
    """Tasks whose webhook events should be looked at again by `now`; each is marked for
    another look a grace period later (the job it gets moves the mark on)."""
    found = redis_replies.members(
        await store.r.zrangebyscore(keys.WEBHOOKS_DUE, "-inf", now, start=0, num=limit)
    )
    for task_id in found:
        await mark_due(store, task_id, now + _GRACE_S)
    return found
