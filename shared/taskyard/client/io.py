"""The client's I/O, the one thing its async core does not write once: a request, a stream of
server-sent events, a pause, closing. `AsyncIO` does them on an event loop; `BlockingIO` does
them blocking, inside coroutines that never suspend, so `TaskyardClient` runs the same core
to its end without any event loop (see `blocking.py`).

Events are read per the server-sent events specification (httpx-sse: multi-line data, `data:`
with or without a space, comments). A request that gets no answer raises
`GatewayUnreachable`; a stream's transport errors pass through, for its reader to resume.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

import httpx
from httpx_sse import ServerSentEvent, aconnect_sse, connect_sse

from taskyard.client.errors import raise_for, unreachable

__all__ = ["AsyncIO", "BlockingIO", "GatewayIO"]


class GatewayIO(Protocol):
    """What the core asks of its I/O."""

    async def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """The answer, its body read."""
        ...

    def events(
        self, path: str, headers: dict[str, str]
    ) -> AbstractAsyncContextManager[AsyncIterator[ServerSentEvent]]:
        """The stream at `path`, open; an error answer raises its `ClientError`."""
        ...

    async def sleep(self, seconds: float) -> None: ...

    async def close(self) -> None: ...


class AsyncIO:
    """The gateway over an `httpx.AsyncClient`, on the running event loop."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http

    async def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return await self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise unreachable(exc) from exc

    @asynccontextmanager
    async def events(
        self, path: str, headers: dict[str, str]
    ) -> AsyncIterator[AsyncIterator[ServerSentEvent]]:
        async with aconnect_sse(self.http, "GET", path, headers=headers, timeout=None) as source:
            if source.response.is_error:
                await source.response.aread()
                raise_for(source.response)
            yield source.aiter_sse()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def close(self) -> None:
        await self.http.aclose()


class BlockingIO:
    """The gateway over an `httpx.Client`: each coroutine blocks in its I/O and never
    suspends, so it completes on its first step with no event loop (and none is disturbed
    where one runs in the same thread)."""

    def __init__(self, http: httpx.Client) -> None:
        self.http = http

    async def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise unreachable(exc) from exc

    @asynccontextmanager
    async def events(
        self, path: str, headers: dict[str, str]
    ) -> AsyncIterator[AsyncIterator[ServerSentEvent]]:
        with connect_sse(self.http, "GET", path, headers=headers, timeout=None) as source:
            if source.response.is_error:
                source.response.read()
                raise_for(source.response)
            yield _Blocking(source.iter_sse())

    async def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    async def close(self) -> None:
        self.http.close()


class _Blocking:
    """A blocking iterator seen as an async one whose steps never suspend. A class, not an
    async generator: nothing is left for an event loop's finalizer when a reader stops early."""

    def __init__(self, items: Iterator[ServerSentEvent]) -> None:
        self.items = items

    def __aiter__(self) -> _Blocking:
        return self

    async def __anext__(self) -> ServerSentEvent:
        try:
            return next(self.items)
        except StopIteration:
            raise StopAsyncIteration from None
