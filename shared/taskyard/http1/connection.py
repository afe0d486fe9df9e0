"""One client connection: httptools parsing on an asyncio protocol, requests answered in order.

A handler gets each request with the connection to answer on. It answers at once and returns
None (no task is made: the cheapest path), or returns an awaitable that the connection runs as
a task; either way the next pipelined request waits until the exchange ends.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import cast

import httptools

from taskyard.http1.framing import Headers, chunk, head
from taskyard.http1.openai_errors import error_body
from taskyard.http1.request import Request

__all__ = ["Connection", "Handler"]

log = logging.getLogger(__name__)

Handler = Callable[[Request, "Connection"], Awaitable[None] | None]

_JSON: Headers = [(b"content-type", b"application/json")]
_MALFORMED = error_body("malformed HTTP request", "invalid_request_error", "bad_request")
_BROKEN = error_body("internal server error", "server_error", "internal_error")
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


class Connection(asyncio.Protocol):
    """Parses requests, hands each to the handler, writes its answer; see the module doc."""

    def __init__(self, handler: Handler, max_body: int, live: set[Connection]) -> None:
        self._handler = handler
        self._max_body = max_body
        self._live = live  # the server's connections open or answering, for its shutdown
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpRequestParser(self)
        self._pending: deque[Request] = deque()
        self._busy = False
        self._keep_alive = True
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._cancel: Callable[[], None] | None = None
        self._source: asyncio.Transport | None = None
        self._writable: asyncio.Future[None] | None = None  # set while writing is paused
        self.closed = False
        self.status = 0  # of the current exchange's response, once started
        self._reset_message()

    # --- asyncio.Protocol -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self._live.add(self)

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:  # an upgrade request included: not spoken here
            self._keep_alive = False
            self.respond(400, _JSON, _MALFORMED)
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._task is None:  # else it stays for a shutdown to cancel, until the task ends
            self._live.discard(self)
        cancel, self._cancel = self._cancel, None
        if cancel is not None:
            cancel()
        self._wake_writer()

    def pause_writing(self) -> None:
        # The client reads slower than we write: stop reading the source, hold the producer.
        if self._source is not None:
            self._source.pause_reading()
        if self._writable is None:
            self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._source is not None:
            self._source.resume_reading()
        self._wake_writer()

    def _wake_writer(self) -> None:
        waiter, self._writable = self._writable, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

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
            self._transport.write(_CONTINUE)

    def on_body(self, body: bytes) -> None:
        # Past the limit the rest is read and dropped, so the client still gets its 413.
        self._size += len(body)
        if self._size <= self._max_body:
            self._body.append(body)

    def on_message_complete(self) -> None:
        too_large = self._size > self._max_body
        path, _, query = self._url.partition(b"?")
        self._pending.append(
            Request(
                self._parser.get_method(),
                path,
                query,
                self._headers,
                b"" if too_large else b"".join(self._body),
                self._parser.should_keep_alive(),
                too_large,
            )
        )
        self._body = []
        if not self._busy:
            self._serve()

    # --- exchanges --------------------------------------------------------------------------

    def _serve(self) -> None:
        """Answer waiting requests in order until one needs a task."""
        while self._pending and not self._busy and not self.closed:
            request = self._pending.popleft()
            self._busy = True
            self.status = 0
            self._keep_alive = request.keep_alive and not self._closing
            try:
                pending = self._handler(request, self)
            except Exception:
                log.exception("the handler failed on %r", request.path)
                pending = None
                self._fail()
            if pending is not None:
                self._task = asyncio.get_running_loop().create_task(self._run(pending))
                return
            self._end_exchange()

    async def _run(self, pending: Awaitable[None]) -> None:
        try:
            await pending
        except Exception:
            log.exception("the handler failed")
            self._fail()
        finally:
            self._task = None
            if self.closed:
                self._live.discard(self)
            self._end_exchange()
            self._serve()

    def _fail(self) -> None:
        self._keep_alive = False
        if self.response_started:
            self.abort()  # mid-response: a second head would corrupt it
        else:
            self.respond(500, _JSON, _BROKEN)

    def _end_exchange(self) -> None:
        self._busy = False
        self._source = None
        self._cancel = None
        if not self._keep_alive:
            self.close()

    # --- responding -------------------------------------------------------------------------

    def respond(self, status: int, headers: Headers, body: bytes) -> None:
        """Send a whole response with a fixed length."""
        self.status = status
        if self._transport is None or self.closed:
            return
        if not self._keep_alive:
            headers = [*headers, (b"connection", b"close")]
        self._transport.write(head(status, headers, len(body)) + body)

    def start_stream(
        self, status: int, headers: Headers, first: bytes = b"", last: bool = False
    ) -> None:
        """Send the head of a chunked response with its first chunk (`last`: and its end)."""
        self.status = status
        if self._transport is None or self.closed:
            return
        if not self._keep_alive:
            headers = [*headers, (b"connection", b"close")]
        self._transport.write(head(status, headers, None) + chunk(first, last))

    def write_chunk(self, data: bytes, last: bool = False) -> None:
        """Send one piece of a streamed response (`last`: and end it)."""
        if self._transport is not None and not self.closed and (data or last):
            self._transport.write(chunk(data, last))

    async def writable(self) -> None:
        """Return once the client reads again (at once unless writing is paused)."""
        if self._writable is not None:
            await self._writable

    def bind_source(
        self, cancel: Callable[[], None] | None, transport: asyncio.Transport | None
    ) -> None:
        """Tie the current exchange to where its answer comes from: `cancel` runs if the client
        leaves, and `transport` stops being read while the client cannot keep up."""
        self._cancel = cancel
        self._source = transport

    @property
    def response_started(self) -> bool:
        return self.status != 0

    @property
    def busy(self) -> bool:
        """Whether a request is being answered or waits its turn."""
        return self._busy or bool(self._pending)

    def close(self) -> None:
        """Close once what was written is sent; requests still waiting are dropped."""
        self._keep_alive = False
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()

    def close_when_idle(self) -> None:
        """Close now if idle, else after the exchanges already received (shutdown)."""
        self._closing = True
        self._keep_alive = False
        if not self.busy:
            self.close()

    def abort(self) -> None:
        """Drop the connection at once, and stop the exchange in progress."""
        if self._transport is not None:
            self._transport.abort()

    def cancel(self) -> asyncio.Task[None] | None:
        """Cancel the exchange's task, if one runs (shutdown, after the drain), and return it
        for the caller to await."""
        task = self._task
        if task is not None:
            task.cancel()
        return task
