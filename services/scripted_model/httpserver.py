"""A lean HTTP/1.1 keep-alive server on asyncio + httptools: just what the scripted model needs.

FastAPI would cost more than the proxy being measured against it, so requests are parsed with
httptools and answered straight from the protocol callback when no delay is asked for.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus

import httptools

__all__ = ["Handler", "HttpProtocol", "Reply", "Request"]


@dataclass(slots=True)
class Request:
    """One parsed request; header names are lower case."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass(slots=True)
class Reply:
    """A response: a whole body, or (when `body` is a list) server-sent events sent chunked."""

    status: int
    body: bytes | list[bytes]
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()
    delay_s: float = 0.0  # before the first byte
    interval_s: float = 0.0  # between stream events
    abort_after: int | None = None  # close the connection after this many stream events


Handler = Callable[[Request], Reply]


class HttpProtocol(asyncio.Protocol):
    """One client connection: requests are answered in order, one at a time (keep-alive)."""

    def __init__(
        self, handler: Handler, extra_headers: dict[str, str], live: set[HttpProtocol]
    ) -> None:
        self._handler = handler
        self._live = live  # the server's open connections, so closing it can drop them
        self._extra = "".join(f"{name}: {value}\r\n" for name, value in extra_headers.items())
        self._parser = httptools.HttpRequestParser(self)
        self._transport: asyncio.Transport | None = None
        self._pending: deque[tuple[Request, bool]] = deque()
        self._task: asyncio.Task[None] | None = None
        self._writable: asyncio.Event = asyncio.Event()
        self._writable.set()
        self._url = b""
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []

    # asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # a TCP server's is a Transport
        self._live.add(self)

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._close()
        except httptools.HttpParserError:
            self._write(_encode_whole(Reply(400, b""), b"", self._extra, keep_alive=False))
            self._close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._live.discard(self)
        self._transport = None
        self._writable.set()  # wake a paused stream, which then sees the connection is gone
        if self._task is not None:
            self._task.cancel()

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    def drop(self) -> None:
        """Close the connection now, whatever it is doing (server shutdown)."""
        if self._transport is not None:
            self._transport.abort()

    # httptools callbacks

    def on_message_begin(self) -> None:
        self._url, self._headers, self._body = b"", {}, []

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        path = self._url.decode("latin-1").split("?", 1)[0]
        method = self._parser.get_method().decode("ascii")
        request = Request(method, path, self._headers, b"".join(self._body))
        self._pending.append((request, self._parser.should_keep_alive()))
        self._serve_pending()

    # answering

    def _serve_pending(self) -> None:
        while self._pending and self._task is None and self._transport is not None:
            request, keep_alive = self._pending.popleft()
            reply = self._handler(request)
            if reply.delay_s or isinstance(reply.body, list):
                self._task = asyncio.get_running_loop().create_task(self._send(reply, keep_alive))
                return
            self._write(_encode_whole(reply, reply.body, self._extra, keep_alive))
            if not keep_alive:
                self._close()

    async def _send(self, reply: Reply, keep_alive: bool) -> None:
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        body = reply.body
        if isinstance(body, list):
            completed = await self._stream(reply, body, keep_alive)
        else:
            self._write(_encode_whole(reply, body, self._extra, keep_alive))
            completed = True
        self._task = None
        if completed and keep_alive:
            self._serve_pending()
        else:
            self._close()

    async def _stream(self, reply: Reply, all_events: list[bytes], keep_alive: bool) -> bool:
        """Send the events; False when the script (or the client) cut the stream short."""
        self._write(_encode_head(reply, self._extra, keep_alive, length=None))
        events = all_events
        if reply.abort_after is not None:
            events = all_events[: reply.abort_after]
        if reply.interval_s:
            sent = await self._send_paced(events, reply.interval_s)
        else:
            self._write(b"".join(_chunk(event) for event in events))
            sent = True
        if not sent or len(events) < len(all_events):
            return False
        self._write(b"0\r\n\r\n")
        return True

    async def _send_paced(self, events: list[bytes], interval_s: float) -> bool:
        for index, event in enumerate(events):
            if index:
                await asyncio.sleep(interval_s)
            await self._writable.wait()
            if self._transport is None:
                return False
            self._write(_chunk(event))
        return True

    def _write(self, data: bytes) -> None:
        if self._transport is not None:
            self._transport.write(data)

    def _close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None


def _encode_whole(reply: Reply, body: bytes, extra: str, keep_alive: bool) -> bytes:
    return _encode_head(reply, extra, keep_alive, length=len(body)) + body


def _encode_head(reply: Reply, extra: str, keep_alive: bool, length: int | None) -> bytes:
    phrase = HTTPStatus(reply.status).phrase
    framing = f"content-length: {length}\r\n" if length is not None else ""
    if length is None:
        framing = "transfer-encoding: chunked\r\ncache-control: no-cache\r\n"
    own = "".join(f"{name}: {value}\r\n" for name, value in reply.headers)
    connection = "" if keep_alive else "connection: close\r\n"
    head = (
        f"HTTP/1.1 {reply.status} {phrase}\r\ncontent-type: {reply.content_type}\r\n"
        f"{framing}{own}{extra}{connection}\r\n"
    )
    return head.encode("latin-1")


def _chunk(event: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(event), event)
