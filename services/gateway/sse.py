"""Server-sent events from a task's Redis stream, resumable by `Last-Event-ID`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import redis.asyncio as aioredis

from shared import keys
from shared.events import Event, decode_entry

__all__ = ["event_stream", "format_sse"]

_BLOCK_MS = 15_000  # a keep-alive comment goes out when nothing happened for this long


def format_sse(event: Event) -> str:
    return f"id: {event.id}\nevent: {event.kind.value}\ndata: {json.dumps(event.data)}\n\n"


async def event_stream(r: aioredis.Redis, task_id: str, last_id: str = "0") -> AsyncIterator[str]:
    """Every event after `last_id`, as SSE text, ending after the task's final event."""
    stream = keys.task_events(task_id)
    while True:
        batch = await r.xread({stream: last_id}, block=_BLOCK_MS, count=100)
        if not batch:
            yield ": keep-alive\n\n"
            continue
        for entry_id, fields in batch[0][1]:
            event = decode_entry(entry_id, fields)
            last_id = entry_id
            yield format_sse(event)
            if event.is_final:
                return
