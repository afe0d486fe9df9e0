"""A task's live events, followed to its final one: a dropped stream is resumed by
`Last-Event-ID` (`_RECONNECTS` tries in a row, with backoff, before `GatewayUnreachable`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import orjson
from httpx_sse import ServerSentEvent

from taskyard.client.errors import unreachable
from taskyard.client.io import GatewayIO
from taskyard.client.wire import events_path
from taskyard.runtime.events import Event, EventKind

__all__ = ["task_events"]

_RECONNECTS = 5
_KINDS = frozenset(kind.value for kind in EventKind)


async def task_events(
    io: GatewayIO, task_id: str, last_event_id: str | None
) -> AsyncIterator[Event]:
    """Every event of the task after `last_event_id`, until its final one."""
    cursor = _Cursor(last_event_id)
    while not cursor.done:
        try:
            async with io.events(events_path(task_id), cursor.headers()) as stream:
                async for sse in stream:
                    if (event := cursor.take(sse)) is not None:
                        yield event
                        if event.is_final:
                            return
        except httpx.TransportError as exc:
            await io.sleep(cursor.failed(exc))


class _Cursor:
    """Where a followed stream stands: the last event id, the reconnects in a row."""

    def __init__(self, last_event_id: str | None) -> None:
        self.last_event_id = last_event_id
        self.failures = 0
        self.done = False

    def headers(self) -> dict[str, str]:
        return {"Last-Event-ID": self.last_event_id} if self.last_event_id else {}

    def take(self, sse: ServerSentEvent) -> Event | None:
        """The event, or None for a kind this client does not know (as a browser's
        EventSource ignores events nobody listens to) and for one with no data, which the SSE
        specification does not dispatch: httpx-sse yields one for the blank line after a
        keep-alive comment once an id was seen (florimondmanca/httpx-sse#35)."""
        self.last_event_id, self.failures = sse.id or self.last_event_id, 0
        if not sse.data or sse.event not in _KINDS:
            return None
        event = Event(id=sse.id, kind=EventKind(sse.event), data=orjson.loads(sse.data))
        self.done = event.is_final
        return event

    def failed(self, exc: httpx.TransportError) -> float:
        """Seconds to wait before reconnecting; raises once the tries are used up."""
        self.failures += 1
        if self.failures > _RECONNECTS:
            raise unreachable(exc) from exc
        return min(0.1 * 2.0**self.failures, 2.0)
