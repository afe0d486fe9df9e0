"""One worker's connection: each request read, its caller identified, decided (`gate`), sent
to the engine as the proxy writes it, and the answer relayed; an attach or exec start that the
engine turns into a raw stream is copied both ways while the engine sends."""

from __future__ import annotations

import asyncio
import contextlib

import structlog

from services.engine_proxy.callers import Callers
from services.engine_proxy.engine import Engine, Upstream
from services.engine_proxy.errors import EngineUnreachable, Refused, error_body
from services.engine_proxy.gate import Forward, Gate
from services.engine_proxy.routes import route
from services.engine_proxy.wire import (
    AnswerHead,
    Request,
    read_body,
    read_head,
    read_request_body,
    relay_answer,
    render_answer,
    render_request,
)

__all__ = ["Relay"]

log = structlog.stdlib.get_logger(__name__)

_PIECE = 64 * 1024
# Headers of the worker's request that the engine gets; the proxy writes the others.
_PASSED = ("user-agent", "content-type")
_UPGRADE = [("Connection", "Upgrade"), ("Upgrade", "tcp")]
# Answered without a token: the Docker SDK asks for the version before it sends any header of
# ours, and both say no more than the engine's version.
_OPEN = frozenset({"ping", "version"})


class Relay:
    """Serves workers' connections (`serve`, one call per connection)."""

    def __init__(self, callers: Callers, gate: Gate, engine: Engine, max_body: int) -> None:
        self._callers = callers
        self._gate = gate
        self._engine = engine
        self._max_body = max_body

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await self._exchange(reader, writer):
                pass
        except (ConnectionError, EngineUnreachable) as exc:
            log.debug("connection ended", error=repr(exc))
        finally:
            writer.close()

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """One request and its answer; whether the connection serves another."""
        try:
            request = await read_head(reader)
        except Refused as refused:
            await _refuse(writer, None, refused, "")
            return False
        if request is None:
            return False
        caller = ""
        try:
            found = route(request.method, request.path)
            if found.name not in _OPEN:
                caller = self._callers.identify(request.headers)
            # Only now is the body read: a refused request's is never waited for.
            request = await read_request_body(request, reader, self._max_body)
            forward = await self._gate.decide(caller, request, found)
        except Refused as refused:
            return await _refuse(writer, request, refused, caller)
        except EngineUnreachable as exc:
            await _answer(writer, 502, error_body(str(exc)), close=True)
            return False
        return await self._forward(request, forward, reader, writer)

    async def _forward(
        self,
        request: Request,
        forward: Forward,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        try:
            upstream, head = await self._engine.send(_outgoing(request, forward))
        except EngineUnreachable as exc:
            await _answer(writer, 502, error_body(str(exc)), close=True)
            return False
        if head.framing(request.method) == "until-close":
            await _stream(head, reader, writer, upstream, both_ways=forward.upgrade)
            return False
        try:
            await self._answer(request.method, head, forward, upstream, writer)
        except BaseException:
            upstream.close()
            raise
        return request.keep_alive and head.keep_alive

    async def _answer(
        self,
        method: str,
        head: AnswerHead,
        forward: Forward,
        upstream: Upstream,
        writer: asyncio.StreamWriter,
    ) -> None:
        if forward.after is None:
            await relay_answer(head, method, upstream.reader, writer)
            self._engine.release(upstream, head.keep_alive)
            return
        body = await read_body(head, method, upstream.reader)
        self._engine.release(upstream, head.keep_alive)
        writer.write(_rewritten(head, forward.after(head.status, body)))
        await writer.drain()


def _outgoing(request: Request, forward: Forward) -> bytes:
    headers = [("Host", "docker")]
    headers += [(name, request.headers[name]) for name in _PASSED if name in request.headers]
    if forward.upgrade and request.headers.get("upgrade", "").lower() == "tcp":
        headers += _UPGRADE
    return render_request(request.method, forward.target, headers, forward.body)


def _rewritten(head: AnswerHead, body: bytes) -> bytes:
    """The answer's head with the length of a body the proxy read (and maybe rewrote)."""
    status_line, *lines = head.raw[:-4].split(b"\r\n")
    kept = [
        line
        for line in lines
        if line.split(b":", 1)[0].strip().lower() not in (b"content-length", b"transfer-encoding")
    ]
    kept.append(b"Content-Length: %d" % len(body))
    return b"\r\n".join([status_line, *kept]) + b"\r\n\r\n" + body


async def _stream(
    head: AnswerHead,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    upstream: Upstream,
    both_ways: bool,
) -> None:
    """An answer that lasts as long as the connection: a raw stream, copied while the engine
    sends. An attach's or exec start's goes both ways (the worker's EOF passed on: an exec may
    still answer after its input ended); any other's only to the worker, whose bytes must never
    reach the engine raw (they could be a request)."""
    to_engine = asyncio.ensure_future(_pipe(reader, upstream.writer)) if both_ways else None
    try:
        writer.write(head.raw)
        await _pipe(upstream.reader, writer)
    finally:
        if to_engine is not None:
            to_engine.cancel()
        upstream.close()


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while piece := await source.read(_PIECE):
            sink.write(piece)
            await sink.drain()
        if sink.can_write_eof():
            sink.write_eof()


async def _answer(writer: asyncio.StreamWriter, status: int, body: bytes, close: bool) -> None:
    writer.write(render_answer(status, body, close))
    await writer.drain()


async def _refuse(
    writer: asyncio.StreamWriter, request: Request | None, refused: Refused, caller: str
) -> bool:
    """Answer a refusal; whether the connection serves another request (not when a body was
    left unread, or the request could not be read)."""
    if request is not None and not refused.from_engine:
        log.warning(
            "refused",
            caller=caller or "(unknown)",
            method=request.method,
            path=request.path[:200],
            status=refused.status,
            reason=refused.reason[:500],
        )
    unread = request is not None and request.has_body and not request.body
    keep = request is not None and request.keep_alive and not unread
    head_only = request is not None and request.method == "HEAD"
    writer.write(render_answer(refused.status, refused.body(), not keep, head_only))
    await writer.drain()
    return keep
