"""Relays a server-sent-event stream from a replica to the client as the events arrive.

On the way it reads the usage chunk (token counts) and, when the proxy asked for usage on the
client's behalf, drops it again so the client sees exactly what it asked for. A stream that
breaks after bytes went out ends with an OpenAI-style error event, then `[DONE]`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson

from taskyard.http1 import Connection
from taskyard.http1.openai_errors import error_event

__all__ = ["StreamRelay"]

_USAGE = b'"usage"'
_EVENT_BREAK = re.compile(rb"\r?\n\r?\n")
_DONE = b"data: [DONE]\n\n"


class StreamRelay:
    """Writes whole SSE events to `client`.

    `feed` takes each upstream body piece; `flush` (after each network read, so one read
    becomes one write) forwards the complete events, and with `done` ends the response in the
    same write.
    """

    def __init__(
        self,
        client: Connection,
        headers: Callable[[], list[tuple[bytes, bytes]]],
        strip_usage: bool,
    ) -> None:
        self._client = client
        self._headers = headers
        self._strip_usage = strip_usage
        self._incoming: list[bytes] = []
        self._pending = b""
        self.started = False
        self.finished = False
        self.usage: dict[str, Any] | None = None

    def feed(self, data: bytes) -> None:
        """Take one piece of the upstream body."""
        self._incoming.append(data)

    def flush(self, done: bool) -> None:
        """Forward every complete event received; `done`: the upstream answer is complete."""
        if self.finished:
            return
        buffer = self._pending + b"".join(self._incoming)
        self._incoming.clear()
        end = len(buffer) if done else _events_end(buffer)
        events, self._pending = buffer[:end], buffer[end:]
        if _USAGE in events:
            events = self._take_usage(events)
        if done:
            self.finished = True
            if not self.started:
                events += _DONE  # an empty stream still ends the way clients expect
        self._send(events, last=done)

    def fail(self, message: str) -> None:
        """The upstream broke mid-stream: end with an error event the client can parse."""
        if not self.finished:
            self.finished = True
            self._send(
                error_event(message, "upstream_error", "stream_interrupted") + _DONE, last=True
            )

    def _send(self, data: bytes, last: bool) -> None:
        if self.started:
            self._client.write_chunk(data, last)
        elif data or last:
            self.started = True
            self._client.start_stream(200, self._headers(), data, last)

    def _take_usage(self, events: bytes) -> bytes:
        kept = []
        for event in _EVENT_BREAK.split(events):
            if _USAGE in event and event.startswith(b"data:"):
                event = self._read_usage(event)
            if event.strip():
                kept.append(event)
        return b"\n\n".join(kept) + b"\n\n" if kept else b""

    def _read_usage(self, event: bytes) -> bytes:
        try:
            chunk = orjson.loads(event[5:])
        except orjson.JSONDecodeError:
            return event
        if not isinstance(chunk, dict) or "usage" not in chunk:
            return event
        usage = chunk.pop("usage")
        if isinstance(usage, dict):
            self.usage = usage
        if not self._strip_usage:
            return event
        if usage is not None and not chunk.get("choices"):
            return b""  # the usage-only chunk the client did not ask for
        return b"data: " + orjson.dumps(chunk)  # a chunk without the field it did not ask for


def _events_end(buffer: bytes) -> int:
    """Where the last complete event ends (blank line, LF or CRLF style); 0 if none does."""
    lf = buffer.rfind(b"\n\n")
    crlf = buffer.rfind(b"\r\n\r\n")
    return max(lf + 2 if lf >= 0 else 0, crlf + 4 if crlf >= 0 else 0)
