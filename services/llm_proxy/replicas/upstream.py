"""Keep-alive HTTP/1.1 connections to one replica, on raw asyncio protocols.

A connection runs one exchange at a time. Body bytes go to a sink callback the moment they
arrive (the streaming path writes them straight to the client); the caller awaits only two
moments, the response head and the end of the message.

Errors are translated here into `UpstreamError`s (`services.llm_proxy.errors`) that say
whether any response byte had arrived, which is what decides if a request may be retried.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from typing import cast

import httptools

from services.llm_proxy.errors import ConnectFailed, UpstreamClosed, UpstreamError, UpstreamTimeout

__all__ = ["UpstreamConnection", "UpstreamPool"]

_PENDING, _HEAD, _DONE = 0, 1, 2


Sink = Callable[[bytes], None]
# Called after each network read that carried part of the body; True once it is complete.
Flush = Callable[[bool], None]


def _drop(_: bytes) -> None:
    pass


class UpstreamConnection(asyncio.Protocol):
    """One connection to a replica; `send`, then `wait_head`, then `wait_done`."""

    def __init__(self, read_timeout: float) -> None:
        self._loop = asyncio.get_running_loop()
        self._read_timeout = read_timeout
        self._parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.uses = 0
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self._phase = _DONE
        self._error: UpstreamError | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._sink: Sink = _drop
        self._flush: Flush | None = None
        self._answered = False
        self._keep_alive = True
        self._last_activity = 0.0
        self._timer: asyncio.TimerHandle | None = None

    # --- caller side ------------------------------------------------------------------------

    def send(self, data: bytes, sink: Sink, flush: Flush | None = None) -> None:
        """Write a request; body bytes of the answer go to `sink`, then `flush` per read."""
        assert self.transport is not None
        self.uses += 1
        self.status = 0
        self.headers = []
        self._phase = _PENDING
        self._error = None
        self._sink = sink
        self._flush = flush
        self._answered = False
        self._last_activity = self._loop.time()
        self._timer = self._loop.call_at(self._last_activity + self._read_timeout, self._check_idle)
        self.transport.write(data)

    async def wait_head(self) -> int:
        """Wait for the response head and return the status."""
        await self._wait_for(_HEAD)
        return self.status

    async def wait_done(self) -> None:
        """Wait until the whole response has arrived."""
        await self._wait_for(_DONE)

    @property
    def reusable(self) -> bool:
        return self._phase == _DONE and self._keep_alive and not self.closed

    def abort(self) -> None:
        """Drop the connection now (the client left, or the answer is no longer wanted)."""
        self._fail(UpstreamClosed("aborted by the proxy", answered=self._answered))
        if self.transport is not None:
            self.transport.abort()

    async def _wait_for(self, phase: int) -> None:
        while self._phase < phase:
            if self._error is not None:
                raise self._error
            self._waiter = self._loop.create_future()
            await self._waiter
        if self._error is not None and self._phase < phase:
            raise self._error

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, error: UpstreamError) -> None:
        if self._phase == _DONE or self._error is not None:
            return
        error.reused = self.uses > 1
        self._error = error
        self._stop_timer()
        self._wake()

    def _check_idle(self) -> None:
        deadline = self._last_activity + self._read_timeout
        if self._loop.time() < deadline:
            self._timer = self._loop.call_at(deadline, self._check_idle)
            return
        self._timer = None
        self._fail(UpstreamTimeout("the replica went silent", answered=self._answered))
        if self.transport is not None:
            self.transport.abort()

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # --- asyncio.Protocol -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        self._answered = True
        self._last_activity = self._loop.time()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(UpstreamClosed(f"malformed answer: {exc}", answered=True))
            self.closed = True
            if self.transport is not None:
                self.transport.abort()
            return
        if self._flush is not None and self._phase >= _HEAD:
            self._flush(self._phase == _DONE)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if exc is None and self._phase == _HEAD and self._ends_at_close():
            self._complete()  # an HTTP/1.0-style body, delimited by the close itself
            if self._flush is not None:
                self._flush(True)
            return
        self._fail(UpstreamClosed("the replica closed the connection", answered=self._answered))

    def _ends_at_close(self) -> bool:
        names = {name for name, _ in self.headers}
        return b"content-length" not in names and b"transfer-encoding" not in names

    # --- httptools callbacks ----------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self.status = self._parser.get_status_code()
        self._phase = _HEAD
        self._wake()

    def on_body(self, body: bytes) -> None:
        self._sink(body)

    def on_message_complete(self) -> None:
        self._keep_alive = self._parser.should_keep_alive()
        self._complete()

    def _complete(self) -> None:
        self._phase = _DONE
        self._stop_timer()
        self._wake()


class UpstreamPool:
    """Idle keep-alive connections to one replica, opened on demand."""

    def __init__(
        self,
        host: str,
        port: int,
        connect_timeout: float,
        read_timeout: float,
        max_idle: int,
        tls: bool = False,
    ) -> None:
        self._host = host
        self._port = port
        self._ssl = ssl.create_default_context() if tls else None
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._max_idle = max_idle
        self._idle: list[UpstreamConnection] = []

    async def acquire(self) -> UpstreamConnection:
        """An idle connection if one is alive, else a new one."""
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
        return await self.connect()

    async def connect(self) -> UpstreamConnection:
        """A fresh connection, not taken from the idle list."""
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout):
                _, conn = await loop.create_connection(
                    lambda: UpstreamConnection(self._read_timeout),
                    self._host,
                    self._port,
                    ssl=self._ssl,
                )
        except (OSError, TimeoutError) as exc:
            raise ConnectFailed(f"cannot connect to {self._host}:{self._port}: {exc}") from exc
        return conn

    def release(self, conn: UpstreamConnection) -> None:
        """Keep `conn` for the next request if its last exchange ended cleanly."""
        if conn.reusable and len(self._idle) < self._max_idle:
            self._idle.append(conn)
        elif not conn.closed and conn.transport is not None:
            conn.closed = True
            conn.transport.close()

    def close(self) -> None:
        """Close every idle connection."""
        for conn in self._idle:
            if conn.transport is not None:
                conn.transport.close()
        self._idle.clear()
