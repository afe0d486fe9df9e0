"""The model clients' transport, the one thing their core (`openai_chat.ChatCore`) does not
write once: send a request, wait, close. `AsyncIO` does it with aiohttp on the event loop;
`BlockingIO` with httpx, blocking, inside coroutines that never suspend, so `OpenAIChat` runs
the same core to its end with no event loop.

An answer is aiohttp's `ClientResponse` as it is (the async path wraps nothing, per call or
per line); `BlockingIO` adapts httpx's to the same shape. Each transport names its own
errors, which the core translates to `LLMError`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterable, Awaitable, Iterator, Mapping
from typing import Protocol

import aiohttp
import httpx
import yarl

__all__ = ["AsyncIO", "BlockingIO", "ChatAnswer", "ChatIO"]


class ChatAnswer(Protocol):
    """An open answer, of any status; the reader releases it."""

    @property
    def status(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def content(self) -> AsyncIterable[bytes]:
        """The body, line by line."""
        ...

    async def read(self) -> bytes: ...

    def release(self) -> object: ...


class ChatIO(Protocol):
    """What the core asks of its transport."""

    # Raised by sending, reading or streaming when the server cannot be reached or breaks off.
    errors: tuple[type[Exception], ...]

    def post(self, body: bytes, headers: dict[str, str]) -> Awaitable[ChatAnswer]: ...

    async def sleep(self, seconds: float) -> None: ...

    async def close(self) -> None: ...


class AsyncIO:
    """aiohttp on the running event loop. Pass `session` to share one aiohttp session (and
    its connections) between clients, as the agent worker does; otherwise one is opened on
    first use, and closed by `close`."""

    errors: tuple[type[Exception], ...] = (aiohttp.ClientError, TimeoutError)

    def __init__(self, url: str, timeout: float, session: aiohttp.ClientSession | None) -> None:
        self.session = session
        self._own_session = session is None
        self._target = yarl.URL(url)  # parsed once, not on every request
        # No total limit (a long answer may stream for minutes); `timeout` of silence ends it.
        self.timeout = aiohttp.ClientTimeout(total=None, sock_connect=10.0, sock_read=timeout)

    def post(self, body: bytes, headers: dict[str, str]) -> Awaitable[aiohttp.ClientResponse]:
        # aiohttp's own awaitable, handed back as it is: no coroutine of ours on each call.
        return self._session().post(self._target, data=body, headers=headers, timeout=self.timeout)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def close(self) -> None:
        if self._own_session and self.session is not None:
            await self.session.close()
            self.session = None

    def _session(self) -> aiohttp.ClientSession:
        if self.session is None:
            self.session = aiohttp.ClientSession()
        return self.session


class BlockingIO:
    """httpx, blocking: each coroutine blocks in its I/O and never suspends, so it completes
    on its first step with no event loop (and none is disturbed where one runs in the same
    thread). One `httpx.Client` serves any number of threads."""

    errors: tuple[type[Exception], ...] = (httpx.HTTPError,)

    def __init__(self, url: str, client: httpx.Client) -> None:
        self.url = url
        self.client = client

    async def post(self, body: bytes, headers: dict[str, str]) -> ChatAnswer:
        request = self.client.build_request("POST", self.url, content=body, headers=headers)
        return _BlockingAnswer(self.client.send(request, stream=True))

    async def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    async def close(self) -> None:
        self.client.close()


class _BlockingAnswer:
    """An httpx answer as a `ChatAnswer` whose coroutines never suspend."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.status = response.status_code
        self.headers = response.headers

    @property
    def content(self) -> _BlockingLines:
        return _BlockingLines(self.response.iter_lines())

    async def read(self) -> bytes:
        return self.response.read()

    def release(self) -> None:
        self.response.close()


class _BlockingLines:
    """httpx's lines as the byte lines aiohttp gives, each step never suspending. A class, not
    an async generator: nothing is left for an event loop's finalizer when a reader stops."""

    def __init__(self, lines: Iterator[str]) -> None:
        self.lines = lines

    def __aiter__(self) -> _BlockingLines:
        return self

    async def __anext__(self) -> bytes:
        try:
            return next(self.lines).encode()
        except StopIteration:
            raise StopAsyncIteration from None
