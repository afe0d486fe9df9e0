"""The Docker engine's socket, which only the proxy opens: keep-alive connections kept for the
next request, and the calls the proxy makes on its own account (`call`: inspecting a
container before letting a worker act on it)."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import orjson

from services.engine_proxy.errors import EngineUnreachable
from services.engine_proxy.wire import (
    MAX_HEAD,
    AnswerHead,
    read_answer_head,
    read_body,
    render_request,
)

__all__ = ["Engine", "Upstream"]

_IDLE_KEPT = 32  # idle connections kept; more are closed when released
_HEADERS = [("Host", "docker"), ("Content-Type", "application/json")]


@dataclass
class Upstream:
    """One connection to the engine."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    reused: bool = False

    def close(self) -> None:
        self.writer.close()


class Engine:
    """Connections to the engine at `address` (``unix:///path`` or ``tcp://host:port``)."""

    def __init__(self, address: str) -> None:
        self._address = urlsplit(address)
        self._idle: list[Upstream] = []

    async def send(self, request: bytes) -> tuple[Upstream, AnswerHead]:
        """Send one request and read the head of its answer; the connection is the caller's
        until it `release`s it (or closes it, after a hijacked stream)."""
        upstream = await self._connect()
        try:
            return upstream, await self._exchange(upstream, request)
        except EngineUnreachable:
            upstream.close()
            if not upstream.reused:
                raise
        # An idle connection the engine closed meanwhile: once more, on a fresh one.
        upstream = await self._open()
        try:
            return upstream, await self._exchange(upstream, request)
        except EngineUnreachable:
            upstream.close()
            raise

    def release(self, upstream: Upstream, reusable: bool) -> None:
        """Keep the connection for the next request, if its exchange ended cleanly."""
        if reusable and len(self._idle) < _IDLE_KEPT and not upstream.reader.at_eof():
            upstream.reused = True
            self._idle.append(upstream)
        else:
            upstream.close()

    async def call(self, method: str, target: str) -> tuple[int, Any]:
        """The proxy's own request: its status and JSON answer (None if it has none)."""
        upstream, head = await self.send(render_request(method, target, _HEADERS, b""))
        try:
            body = await read_body(head, method, upstream.reader)
        except BaseException:
            upstream.close()
            raise
        self.release(upstream, head.keep_alive)
        try:
            return head.status, orjson.loads(body) if body else None
        except orjson.JSONDecodeError:
            return head.status, None

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for upstream in idle:
            upstream.close()
            with contextlib.suppress(OSError):
                await upstream.writer.wait_closed()

    async def _connect(self) -> Upstream:
        while self._idle:
            upstream = self._idle.pop()
            if not upstream.reader.at_eof():
                return upstream
            upstream.close()
        return await self._open()

    async def _open(self) -> Upstream:
        try:
            if self._address.scheme == "unix":
                reader, writer = await asyncio.open_unix_connection(
                    self._address.path, limit=MAX_HEAD
                )
            else:
                host, port = self._address.hostname, self._address.port
                reader, writer = await asyncio.open_connection(host, port, limit=MAX_HEAD)
        except OSError as exc:
            raise EngineUnreachable(f"cannot reach the Docker engine: {exc}") from exc
        return Upstream(reader, writer)

    async def _exchange(self, upstream: Upstream, request: bytes) -> AnswerHead:
        # The engine may answer before the body's end (a refusal) and close: its answer is
        # still there to read; if none is, the connection is gone (`read_answer_head` says so).
        with contextlib.suppress(OSError):
            upstream.writer.write(request)
            await upstream.writer.drain()
        return await read_answer_head(upstream.reader)
