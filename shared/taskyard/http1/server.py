"""Listening, and closing with a drain: the server side of the HTTP/1.1 core."""

from __future__ import annotations

import asyncio
import socket

from taskyard.http1.connection import Connection, Handler

__all__ = ["HttpServer", "listen_socket"]

_BACKLOG = 2048  # the benchmarks open hundreds of connections at once


def listen_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (0 picks a free port)."""
    return socket.create_server((host, port), backlog=_BACKLOG)


class HttpServer:
    """Serves `handler` on a socket until `close()`; bodies past `max_body` bytes are dropped
    (the request says so, for a 413)."""

    def __init__(self, handler: Handler, max_body: int) -> None:
        self._handler = handler
        self._max_body = max_body
        self._server: asyncio.Server | None = None
        self._live: set[Connection] = set()

    async def start(self, sock: socket.socket) -> int:
        """Serve on `sock` (see `listen_socket`) and return its port."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: Connection(self._handler, self._max_body, self._live), sock=sock
        )
        port: int = sock.getsockname()[1]
        return port

    async def close(self, drain_s: float = 0.0) -> None:
        """Stop accepting, let exchanges in progress finish for up to `drain_s`, then drop
        every connection and cancel what still runs."""
        if self._server is None:
            return
        self._server.close()
        for conn in list(self._live):
            conn.close_when_idle()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + drain_s
        while any(c.busy for c in self._live) and loop.time() < deadline:
            await asyncio.sleep(0.05)
        cancelled = []
        for conn in list(self._live):
            conn.abort()
            if (task := conn.cancel()) is not None:
                cancelled.append(task)
        if cancelled:  # let them unwind here, not be destroyed pending with the loop
            await asyncio.wait(cancelled, timeout=1.0)
        await self._server.wait_closed()
