"""Server-sent events from a task's event stream, resumable by `Last-Event-ID`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from contextlib import aclosing

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from services.gateway.event_hub import Batch

__all__ = ["EventStream", "format_sse"]

_KEEP_ALIVE = b": keep-alive\n\n"


def format_sse(batch: Batch) -> bytes:
    """The batch's events as SSE text (the stored data is JSON text already); a keep-alive
    comment for an empty batch."""
    if not batch.entries:
        return _KEEP_ALIVE
    return "".join(
        f"id: {entry_id}\nevent: {fields['kind']}\ndata: {fields['data']}\n\n"
        for entry_id, fields in batch.entries
    ).encode()


class EventStream(Response):
    """A task's events as `text/event-stream`, a chunk per batch, the final one ending the
    response; it stops when the client goes.

    Not Starlette's `StreamingResponse`: that runs each response in a task group of its own
    and sends its end as a chunk of its own, costs paid per stream and per event."""

    def __init__(self, batches: AsyncGenerator[Batch]) -> None:
        self.batches = batches
        self.status_code = 200
        self.background = None
        # A header, not the class's `media_type`: FastAPI would document the route's JSON
        # errors under that media type too.
        self.init_headers({"Content-Type": "text/event-stream; charset=utf-8",
                           "Cache-Control": "no-cache", "X-Accel-Buffering": "no"})  # fmt: skip

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        streaming = asyncio.current_task()
        assert streaming is not None
        ended = False

        async def watch() -> None:
            try:
                while (await receive())["type"] != "http.disconnect":
                    pass
            finally:  # the client left, or its request failed: stop streaming
                if not ended:
                    streaming.cancel()

        watcher = asyncio.create_task(watch())
        try:
            await self._stream(send)
        except asyncio.CancelledError:
            if not watcher.done():
                raise  # cancelled from elsewhere (the server stopping)
            streaming.uncancel()
            watcher.result()  # a failed request raises here; a client that left is an end
        finally:
            ended = True
            watcher.cancel()

    async def _stream(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        final = False
        async with aclosing(self.batches) as batches:
            async for batch in batches:
                final = batch.final
                await send({"type": "http.response.body", "body": format_sse(batch),
                            "more_body": not final})  # fmt: skip
        if not final:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
