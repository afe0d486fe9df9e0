"""A lean HTTP/1.1 server: httptools parsing on asyncio protocols, keep-alive, streaming replies.

Why not an ASGI stack: the proxy must add well under a millisecond, and every layer of framework
between the socket and the forwarding code costs tens of microseconds per request. This module
keeps exactly what the proxy needs: one request at a time per connection (pipelined requests
wait their turn), bodies bounded in size, fixed-length and chunked replies, and a hook that
fires when the client goes away so the upstream request can be cancelled.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import cast

import httptools

__all__ = ["Connection", "Handler", "HttpServer", "Request"]

_REASONS = {status.value: status.phrase.encode() for status in HTTPStatus}
_ERROR_400 = (
    b'{"error":{"message":"malformed HTTP request","type":"invalid_request_error",'
    b'"param":null,"code":"bad_request"}}'
)


class Request:
    """One parsed request; header names are lower-case bytes."""

    __slots__ = ("body", "body_too_large", "headers", "keep_alive", "method", "path")

    def __init__(
        self,
        method: bytes,
        path: bytes,
        headers: dict[bytes, bytes],
        body: bytes,
        keep_alive: bool,
        body_too_large: bool,
    ) -> None:
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.keep_alive = keep_alive
        self.body_too_large = body_too_large


Handler = Callable[[Request, "Connection"], Awaitable[None]]


def _head(status: int, headers: list[tuple[bytes, bytes]], framing: bytes) -> bytes:
    lines = [b"HTTP/1.1 %d %s\r\n" % (status, _REASONS.get(status, b"Unknown"))]
    lines.extend(b"%s: %s\r\n" % pair for pair in headers)
    lines.append(framing)
    return b"".join(lines)


class Connection(asyncio.Protocol):
    """One client connection: parses requests and hands each to the handler, in order."""

    def __init__(self, handler: Handler, max_body: int, live: set[Connection]) -> None:
        self._handler = handler
        self._max_body = max_body
        self._live = live  # the server's open connections, for draining on shutdown
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpRequestParser(self)
        self._pending: deque[Request] = deque()
        self._busy = False
        self._keep_alive = True
        self._closing = False
        self._cancel: Callable[[], None] | None = None
        self._flow: asyncio.Transport | None = None
        self.closed = False
        self.status = 0  # of the current exchange's response, once sent
        self._reset_message()

    # --- asyncio.Protocol -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self._live.add(self)

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            self._reply_raw(400, _ERROR_400)
            self._close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._live.discard(self)
        cancel, self._cancel = self._cancel, None
        if cancel is not None:
            cancel()

    def pause_writing(self) -> None:
        # The client reads slower than the upstream writes: stop reading the upstream.
        if self._flow is not None:
            self._flow.pause_reading()

    def resume_writing(self) -> None:
        if self._flow is not None:
            self._flow.resume_reading()

    # --- httptools callbacks ----------------------------------------------------------------

    def _reset_message(self) -> None:
        self._url = b""
        self._headers: dict[bytes, bytes] = {}
        self._body: list[bytes] = []
        self._size = 0

    def on_message_begin(self) -> None:
        self._reset_message()

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.lower()] = value

    def on_headers_complete(self) -> None:
        # curl and others wait for this before sending a large body.
        if self._headers.get(b"expect", b"").lower() == b"100-continue" and self._transport:
            self._transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        # Past the limit the rest is read and dropped, so the client still gets its 413.
        self._size += len(body)
        if self._size <= self._max_body:
            self._body.append(body)

    def on_message_complete(self) -> None:
        too_large = self._size > self._max_body
        request = Request(
            self._parser.get_method(),
            self._url,
            self._headers,
            b"" if too_large else b"".join(self._body),
            self._parser.should_keep_alive(),
            too_large,
        )
        self._body = []
        if self._busy:
            self._pending.append(request)
        else:
            self._start(request)

    # --- request lifecycle ------------------------------------------------------------------

    def _start(self, request: Request) -> None:
        self._busy = True
        self.status = 0
        self._keep_alive = request.keep_alive and not self._closing
        asyncio.get_running_loop().create_task(self._run(request))

    async def _run(self, request: Request) -> None:
        try:
            await self._handler(request, self)
        finally:
            self._finish_exchange()

    def _finish_exchange(self) -> None:
        self._busy = False
        self._flow = None
        self._cancel = None
        if not self._keep_alive:
            self._close()
        elif self._pending and not self.closed:
            self._start(self._pending.popleft())

    def _close(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()

    # --- responding -------------------------------------------------------------------------

    def bind_upstream(
        self, cancel: Callable[[], None] | None, transport: asyncio.Transport | None
    ) -> None:
        """Tie the current upstream exchange to this client: `cancel` runs if the client
        leaves, and `transport` stops being read while the client cannot keep up."""
        self._cancel = cancel
        self._flow = transport

    def respond(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        """Send a whole response with a fixed length."""
        self.status = status
        if self._transport is None or self.closed:
            return
        if not self._keep_alive:
            headers = [*headers, (b"connection", b"close")]
        framing = b"content-length: %d\r\n\r\n" % len(body)
        self._transport.write(_head(status, headers, framing) + body)

    def start_stream(
        self, status: int, headers: list[tuple[bytes, bytes]], first: bytes, last: bool
    ) -> None:
        """Send the head of a chunked response with its first chunk (`last`: and its end)."""
        self.status = status
        if self._transport is None or self.closed:
            return
        head = _head(status, headers, b"transfer-encoding: chunked\r\n\r\n")
        self._transport.write(head + _chunk(first, last))

    def write_chunk(self, data: bytes, last: bool) -> None:
        """Send one piece of a streamed response (`last`: and end it)."""
        if self._transport is not None and not self.closed and (data or last):
            self._transport.write(_chunk(data, last))

    @property
    def busy(self) -> bool:
        """Whether a request is being answered or waits its turn."""
        return self._busy or bool(self._pending)

    def close_when_idle(self) -> None:
        """Close now if idle, else after the current exchanges (shutdown)."""
        self._closing = True
        self._keep_alive = False
        if not self.busy:
            self._close()

    @property
    def response_started(self) -> bool:
        return self.status != 0

    def abort(self) -> None:
        """Drop the connection at once."""
        if self._transport is not None:
            self._transport.abort()

    def _reply_raw(self, status: int, body: bytes) -> None:
        self._keep_alive = False
        self.respond(status, [(b"content-type", b"application/json")], body)


def _chunk(data: bytes, last: bool) -> bytes:
    framed = b"%x\r\n%s\r\n" % (len(data), data) if data else b""
    return framed + b"0\r\n\r\n" if last else framed


class HttpServer:
    """Serves `handler` on host:port until `close()`; port 0 picks a free port."""

    def __init__(self, handler: Handler, max_body: int) -> None:
        self._handler = handler
        self._max_body = max_body
        self._server: asyncio.base_events.Server | None = None
        self._live: set[Connection] = set()

    async def start(self, host: str, port: int) -> int:
        """Start listening and return the bound port."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: Connection(self._handler, self._max_body, self._live),
            host,
            port,
            backlog=2048,
        )
        return self._server.sockets[0].getsockname()[1]

    async def close(self, drain_s: float = 0.0) -> None:
        """Stop accepting, let requests in progress finish for up to `drain_s`, then close
        every connection."""
        if self._server is None:
            return
        self._server.close()
        for conn in list(self._live):
            conn.close_when_idle()
        deadline = asyncio.get_running_loop().time() + drain_s
        while any(c.busy for c in self._live) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        for conn in list(self._live):
            conn.abort()
        await self._server.wait_closed()
