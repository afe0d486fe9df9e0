"""Server-sent events from a task's event stream, resumable by `Last-Event-ID`."""

from __future__ import annotations

from collections.abc import AsyncIterator

from services.gateway.event_hub import EventHub
from shared.events import Event, dumps

__all__ = ["event_stream", "format_sse"]


def format_sse(event: Event) -> str:
    return f"id: {event.id}\nevent: {event.kind.value}\ndata: {dumps(event.data)}\n\n"


async def event_stream(
    hub: EventHub, task_id: str, last_id: str, ended: bool
) -> AsyncIterator[str]:
    """Every event after `last_id`, as SSE text, ending after the task's final event; a
    keep-alive comment while nothing happens."""
    async for event in hub.follow(task_id, last_id, ended):
        yield ": keep-alive\n\n" if event is None else format_sse(event)
