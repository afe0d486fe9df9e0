"""OpenAI-compatible chat clients: any server, any model name, sync and async.

Both speak the wire format of `taskyard.agentkit.llms.wire`. Every call is written once, as
coroutines in `ChatCore` over a transport (`taskyard.agentkit.llms.io`): `AsyncOpenAIChat` is
the core over aiohttp, and `OpenAIChat` the same core over blocking httpx, its methods derived
with `taskyard.plumbing.no_suspend` (the core's coroutines never suspend there, so they finish
with no event loop: in a plain script, in any thread, and in a thread whose loop is running).
Not the `openai` SDK: measured in one agent worker process with 1,000 calls in flight against
a server answering after 2 s, the SDK on httpx took 32 s for what aiohttp does in 2.4 s
(httpx's pool slows down with many open connections), and the SDK's typed parsing alone costs
about 1.3 ms per call.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

import aiohttp
import httpx

from taskyard.agentkit.llms.base import ChatMessages, ChatResult, UsageSink
from taskyard.agentkit.llms.errors import LLMError
from taskyard.agentkit.llms.io import AsyncIO, BlockingIO, ChatAnswer, ChatIO
from taskyard.agentkit.llms.wire import (
    DONE,
    SSEDecoder,
    StreamAccumulator,
    error_from_response,
    loads,
    request_body,
    request_headers,
    to_result,
    usage_of,
)
from taskyard.plumbing.no_suspend import blocking_method, iterating_method

__all__ = ["AsyncOpenAIChat", "ChatCore", "OpenAIChat", "UsageSink"]

_PATH = "/chat/completions"
_MAX_BACKOFF_S = 8.0


class ChatCore:
    """Every model call, written once over a `ChatIO`: the request built, sent (again after
    a transient failure), and its answer read, or raised as the `LLMError` it means."""

    def __init__(
        self,
        io: ChatIO,
        url: str,
        model: str,
        *,
        api_key: str,
        max_retries: int,
        params: Mapping[str, Any],
    ) -> None:
        self.io = io
        self.url = url
        self.model = model
        self.api_key = api_key
        self.max_retries = max_retries
        self.params = dict(params)

    async def chat(
        self,
        messages: ChatMessages,
        *,
        session_id: int | str | None = None,
        task_id: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        on_usage: UsageSink | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        top_p: float | None = None,
        stop: list[str] | None = None,
    ) -> ChatResult:
        """One completion."""
        params = self._params(temperature, max_tokens, top_p, stop)
        body = request_body(self.model, messages, tools=tools, params=params, stream=False)
        answer = await self._open(body, self._headers(session_id, task_id, extra_headers))
        try:
            return _result(loads(await answer.read()), bool(tools), on_usage)
        except self.io.errors as exc:
            raise LLMError(f"model answer broke off: {exc}") from exc
        finally:
            answer.release()

    async def stream_chat(
        self,
        messages: ChatMessages,
        *,
        session_id: int | str | None = None,
        task_id: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        on_usage: UsageSink | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        top_p: float | None = None,
        stop: list[str] | None = None,
    ) -> AsyncGenerator[ChatResult, None]:
        """One streamed completion, as snapshots so far."""
        params = self._params(temperature, max_tokens, top_p, stop)
        body = request_body(self.model, messages, tools=tools, params=params, stream=True)
        turn, events = StreamAccumulator(), SSEDecoder()
        answer = await self._open(body, self._headers(session_id, task_id, extra_headers))
        try:
            async for raw in answer.content:
                data = events.feed(raw.decode())
                if data == DONE:
                    break
                if data is not None and turn.add(loads(data)):
                    yield turn.result(bool(tools))
        except self.io.errors as exc:
            raise LLMError(f"model stream broke: {exc}") from exc
        finally:
            answer.release()
        if on_usage is not None:
            on_usage(turn.usage)
        yield turn.result(bool(tools))

    async def close(self) -> None:
        """Close the connections the client opened itself."""
        await self.io.close()

    async def _open(self, body: bytes, headers: dict[str, str]) -> ChatAnswer:
        """The open answer of a successful request, after retries; the caller releases it."""
        attempt = 0
        while True:
            try:
                answer = await self.io.post(body, headers)
            except self.io.errors as exc:
                error = LLMError(f"model server unreachable: {exc!r}")
            else:
                if answer.status < 400:
                    return answer
                retry_after = answer.headers.get("Retry-After")
                error = error_from_response(answer.status, await answer.read(), retry_after)
                answer.release()
            wait = self._retry_in(error, attempt)
            if wait is None:
                raise error
            await self.io.sleep(wait)
            attempt += 1

    def _params(
        self,
        temperature: float | None,
        max_tokens: int | None,
        top_p: float | None,
        stop: list[str] | None,
    ) -> dict[str, Any]:
        if temperature is None and max_tokens is None and top_p is None and stop is None:
            return self.params  # most calls set none: no dict is built for them
        return self.params | _set(temperature=temperature, max_tokens=max_tokens, top_p=top_p,
                                  stop=stop)  # fmt: skip

    def _headers(
        self,
        session_id: int | str | None,
        task_id: str | None,
        extra_headers: Mapping[str, str] | None,
    ) -> dict[str, str]:
        headers = request_headers(self.api_key, session_id, task_id)
        return (headers | dict(extra_headers)) if extra_headers else headers

    def _retry_in(self, error: LLMError, attempt: int) -> float | None:
        """Seconds to wait before trying again, or None to give up. The caller's own spent
        rate limit, or a Retry-After longer than the longest backoff, goes back to the caller
        at once: how long to wait for a budget is its decision, not the client's."""
        if attempt >= self.max_retries or not error.transient or error.rate_limited:
            return None
        backoff = min(0.5 * 2.0**attempt, _MAX_BACKOFF_S)
        if error.retry_after is None:
            return backoff
        return max(backoff, error.retry_after) if error.retry_after <= _MAX_BACKOFF_S else None


class AsyncOpenAIChat(ChatCore):
    """The async twin of `OpenAIChat`: same arguments, same results, awaited.

    Pass `session` to share one aiohttp session (and its connections) between clients, as
    the agent worker does; otherwise the client opens its own on first use.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str = "EMPTY",
        timeout: float = 120.0,
        max_retries: int = 2,
        temperature: float | None = None,
        max_tokens: int | None = None,
        top_p: float | None = None,
        stop: list[str] | None = None,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        url = _url(base_url)
        params = _set(temperature=temperature, max_tokens=max_tokens, top_p=top_p, stop=stop)
        super().__init__(AsyncIO(url, timeout, session), url, model, api_key=api_key,
                         max_retries=max_retries, params=params)  # fmt: skip


def _core_of(client: OpenAIChat) -> ChatCore:
    return client._core


def _suspended() -> RuntimeError:
    return RuntimeError("the blocking model client's I/O suspended: it must use BlockingIO only")


class OpenAIChat:
    """Blocking client: ``OpenAIChat(base_url=..., model=...)``.

    `chat` returns the text, or an `LLMResponse` when `tools` are given; `stream_chat`
    yields snapshots of the same (the text so far), the last one complete. Errors are raised
    as `LLMError`; connection errors, 429 and 5xx are retried `max_retries` times first
    (after the server's Retry-After), except a spent rate limit of the caller's own
    (``rate_limit_exceeded``) or a Retry-After past 8 s, which are raised at once.

    Per call, `extra_headers` are added to the request (they win over the client's own, the
    bearer credential included) and `on_usage` is told the call's token usage. One client
    serves any number of threads at once.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str = "EMPTY",
        timeout: float = 120.0,
        max_retries: int = 2,
        temperature: float | None = None,
        max_tokens: int | None = None,
        top_p: float | None = None,
        stop: list[str] | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        url = _url(base_url)
        params = _set(temperature=temperature, max_tokens=max_tokens, top_p=top_p, stop=stop)
        self.client = client or httpx.Client(timeout=httpx.Timeout(timeout, connect=10.0))
        self._core = ChatCore(BlockingIO(url, self.client), url, model, api_key=api_key,
                              max_retries=max_retries, params=params)  # fmt: skip

    chat = blocking_method(ChatCore.chat, _core_of, _suspended)
    stream_chat = iterating_method(ChatCore.stream_chat, _core_of, _suspended)
    close = blocking_method(ChatCore.close, _core_of, _suspended)


def _url(base_url: str) -> str:
    return base_url.rstrip("/") + _PATH


def _set(**params: Any) -> dict[str, Any]:
    """The generation parameters given a value; None leaves a parameter to the default."""
    return {name: value for name, value in params.items() if value is not None}


def _result(completion: dict[str, Any], with_tools: bool, on_usage: UsageSink | None) -> ChatResult:
    if on_usage is not None:
        on_usage(usage_of(completion))
    return to_result(completion, with_tools)
