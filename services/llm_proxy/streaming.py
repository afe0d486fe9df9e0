"""Relays a server-sent-event stream from a replica to the client as the events arrive.

On the way it reads the usage chunk (token counts) and, when the proxy asked for usage on the
client's behalf, drops it again so the client sees exactly what it asked for. A stream that
breaks after bytes went out ends with an OpenAI-style error event, then `[DONE]`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from services.llm_proxy.httpserver import Connection

__all__ = ["StreamRelay", "error_event"]

_USAGE = b'"usage":{'
_NULL_USAGE = b',"usage":null'
_DONE = b"data: [DONE]\n\n"


def error_event(message: str, code: str) -> bytes:
    """An SSE event the openai SDK raises as an `APIError`."""
    error = {"message": message, "type": "upstream_error", "param": None, "code": code}
    return b"data: " + orjson.dumps({"error": error}) + b"\n\n"


class StreamRelay:
    """Writes whole SSE events to `client`; call `feed` per upstream chunk, then `finish`."""

    def __init__(
        self,
        client: Connection,
        headers: Callable[[], list[tuple[bytes, bytes]]],
        strip_usage: bool,
    ) -> None:
        self._client = client
        self._headers = headers
        self._strip_usage = strip_usage
        self._pending = b""
        self.started = False
        self.usage: dict[str, Any] | None = None

    def feed(self, data: bytes) -> None:
        """Forward every complete event in `data`; keep a trailing partial one for later."""
        buffer = self._pending + data if self._pending else data
        end = buffer.rfind(b"\n\n")
        if end < 0:
            self._pending = buffer
            return
        events, self._pending = buffer[: end + 2], buffer[end + 2 :]
        if _USAGE in events or (self._strip_usage and _NULL_USAGE in events):
            events = self._take_usage(events)
        self._send(events)

    def finish(self) -> None:
        """The upstream ended cleanly: flush what is left and end the response."""
        self._send(self._pending)
        self._pending = b""
        if not self.started:
            self._send(_DONE)
        self._client.end_stream()

    def fail(self, message: str) -> None:
        """The upstream broke mid-stream: end with an error event the client can parse."""
        self._send(error_event(message, "stream_interrupted") + _DONE)
        self._client.end_stream()

    def _send(self, data: bytes) -> None:
        if not data:
            return
        if self.started:
            self._client.write_chunk(data)
        else:
            self.started = True
            self._client.start_stream(200, self._headers(), data)

    def _take_usage(self, events: bytes) -> bytes:
        kept = []
        for event in events.split(b"\n\n"):
            if _USAGE in event and event.startswith(b"data: "):
                event = self._read_usage(event)
            elif self._strip_usage:
                event = event.replace(_NULL_USAGE, b"")
            if event:
                kept.append(event)
        return b"\n\n".join(kept) + b"\n\n" if kept else b""

    def _read_usage(self, event: bytes) -> bytes:
        try:
            chunk = orjson.loads(event[6:])
        except orjson.JSONDecodeError:
            return event
        self.usage = chunk.get("usage") or self.usage
        if not self._strip_usage:
            return event
        if not chunk.get("choices"):
            return b""  # the usage-only chunk the client did not ask for
        chunk.pop("usage", None)
        return b"data: " + orjson.dumps(chunk)
