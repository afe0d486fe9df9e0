"""Writes the scripted app's replies on the shared HTTP/1.1 core: at once when no delay is
asked for (no task per request: the scripted model must cost less than what it measures),
else from a task that waits, then paces the stream's events."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from devstack.scripted_model.app import ScriptedApp
from devstack.scripted_model.reply import Reply
from taskyard.http1 import Connection, Headers, Request

__all__ = ["Responder"]

_NO_CACHE = (b"cache-control", b"no-cache")


class Responder:
    """The `taskyard.http1` handler of one scripted replica; `extra` goes on every response."""

    def __init__(self, app: ScriptedApp, extra: Headers) -> None:
        self._app = app
        self._extra = extra

    def __call__(self, request: Request, conn: Connection) -> Awaitable[None] | None:
        reply = self._app.handle(request)
        if reply.delay_s or reply.hold_until or isinstance(reply.body, list):
            return self._send(reply, conn)
        conn.respond(reply.status, self._headers(reply), reply.body)
        return None

    def _headers(self, reply: Reply) -> Headers:
        return [(b"content-type", reply.content_type), *reply.headers, *self._extra]

    async def _send(self, reply: Reply, conn: Connection) -> None:
        if reply.hold_until:
            await self._app.gate.join(reply.hold_until)
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if isinstance(reply.body, list):
            await self._stream(reply, reply.body, conn)
        else:
            conn.respond(reply.status, self._headers(reply), reply.body)

    async def _stream(self, reply: Reply, events: list[bytes], conn: Connection) -> None:
        """Send the events; a script that cuts the stream short closes the connection."""
        sent = events if reply.abort_after is None else events[: reply.abort_after]
        whole = len(sent) == len(events)
        headers = [*self._headers(reply), _NO_CACHE]
        if not reply.interval_s:
            conn.start_stream(reply.status, headers, b"".join(sent), last=whole)
        else:
            conn.start_stream(reply.status, headers)
            for index, event in enumerate(sent):
                if index:
                    await asyncio.sleep(reply.interval_s)
                await conn.writable()
                if conn.closed:
                    return
                conn.write_chunk(event)
            if whole:
                conn.write_chunk(b"", last=True)
        if not whole:
            conn.close()
