"""OpenAI-compatible chat clients: any server, any model name, sync and async.

Both speak the wire format of `taskyard.agentkit.llms.wire`; each class here is only its transport
(httpx for the sync client, aiohttp for the async one) and the retries. Not the `openai` SDK:
measured in one agent worker process with 1,000 calls in flight against a server answering
after 2 s, the SDK on httpx took 32 s for what aiohttp does in 2.4 s (httpx's pool slows down
with many open connections), and the SDK's typed parsing alone costs about 1.3 ms per call.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping
from typing import Any

import aiohttp
import httpx
import yarl

from taskyard.agentkit.llms.base import ChatMessages, ChatResult
from taskyard.agentkit.llms.errors import LLMError
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

__all__ = ["AsyncOpenAIChat", "OpenAIChat", "UsageSink"]

_PATH = "/chat/completions"

# Told the token usage of a completed call (an empty dict when the server reported none);
# a call's text result has no room for it.
UsageSink = Callable[[dict[str, int]], None]


class _ChatConfig:
    """Model, default generation parameters and retry policy, shared by both clients."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str,
        max_retries: int,
        params: dict[str, Any],
    ) -> None:
        self.url = base_url.rstrip("/") + _PATH
        self.model = model
        self.api_key = api_key
        self.max_retries = max_retries
        self.params = {k: v for k, v in params.items() if v is not None}

    def _request(
        self,
        messages: ChatMessages,
        session_id: int | str | None,
        task_id: str | None,
        tools: list[dict[str, Any]] | None,
        params: dict[str, Any],
        stream: bool,
        extra_headers: Mapping[str, str] | None = None,
    ) -> tuple[bytes, dict[str, str]]:
        body = request_body(
            self.model, messages, tools=tools, params={**self.params, **params}, stream=stream
        )
        headers = request_headers(self.api_key, session_id, task_id)
        return body, (headers | dict(extra_headers)) if extra_headers else headers

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


_MAX_BACKOFF_S = 8.0


def _result(completion: dict[str, Any], with_tools: bool, on_usage: UsageSink | None) -> ChatResult:
    if on_usage is not None:
        on_usage(usage_of(completion))
    return to_result(completion, with_tools)


class OpenAIChat(_ChatConfig):
    """Blocking client: ``OpenAIChat(base_url=..., model=...)``.

    `chat` returns the text, or an `LLMResponse` when `tools` are given; `stream_chat`
    yields snapshots of the same (the text so far), the last one complete. Errors are raised
    as `LLMError`; connection errors, 429 and 5xx are retried `max_retries` times first
    (after the server's Retry-After), except a spent rate limit of the caller's own
    (``rate_limit_exceeded``) or a Retry-After past 8 s, which are raised at once.

    Per call, `extra_headers` are added to the request (they win over the client's own, the
    bearer credential included) and `on_usage` is told the call's token usage.
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
        params = {"temperature": temperature, "max_tokens": max_tokens, "top_p": top_p,
                  "stop": stop}  # fmt: skip
        super().__init__(base_url, model, api_key, max_retries, params)
        self.client = client or httpx.Client(timeout=httpx.Timeout(timeout, connect=10.0))

    def chat(
        self,
        messages: ChatMessages,
        *,
        session_id: int | str | None = None,
        task_id: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        on_usage: UsageSink | None = None,
        **params: Any,
    ) -> ChatResult:
        """One completion."""
        body, headers = self._request(
            messages, session_id, task_id, tools, params, False, extra_headers
        )
        response = self._open(body, headers)
        try:
            return _result(loads(response.read()), bool(tools), on_usage)
        except httpx.HTTPError as exc:
            raise LLMError(f"model answer broke off: {exc}") from exc
        finally:
            response.close()

    def stream_chat(
        self,
        messages: ChatMessages,
        *,
        session_id: int | str | None = None,
        task_id: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        on_usage: UsageSink | None = None,
        **params: Any,
    ) -> Iterator[ChatResult]:
        """One streamed completion, as snapshots so far."""
        body, headers = self._request(
            messages, session_id, task_id, tools, params, True, extra_headers
        )
        turn, events = StreamAccumulator(), SSEDecoder()
        response = self._open(body, headers)
        try:
            for line in response.iter_lines():
                data = events.feed(line)
                if data == DONE:
                    break
                if data is not None and turn.add(loads(data)):
                    yield turn.result(bool(tools))
        except httpx.HTTPError as exc:
            raise LLMError(f"model stream broke: {exc}") from exc
        finally:
            response.close()
        if on_usage is not None:
            on_usage(turn.usage)
        yield turn.result(bool(tools))

    def _open(self, body: bytes, headers: dict[str, str]) -> httpx.Response:
        """The open response of a successful request, after retries; the caller closes it."""
        attempt = 0
        while True:
            try:
                response = self.client.send(
                    self.client.build_request("POST", self.url, content=body, headers=headers),
                    stream=True,
                )
            except httpx.HTTPError as exc:
                error = LLMError(f"model server unreachable: {exc}")
            else:
                if response.status_code < 400:
                    return response
                error = error_from_response(
                    response.status_code, response.read(), response.headers.get("retry-after")
                )
                response.close()
            wait = self._retry_in(error, attempt)
            if wait is None:
                raise error
            time.sleep(wait)
            attempt += 1

    def close(self) -> None:
        self.client.close()


class AsyncOpenAIChat(_ChatConfig):
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
        params = {"temperature": temperature, "max_tokens": max_tokens, "top_p": top_p,
                  "stop": stop}  # fmt: skip
        super().__init__(base_url, model, api_key, max_retries, params)
        self.session = session
        self._own_session = session is None
        self._target = yarl.URL(self.url)  # parsed once, not on every request
        # No total limit (a long answer may stream for minutes); `timeout` of silence ends it.
        self.timeout = aiohttp.ClientTimeout(total=None, sock_connect=10.0, sock_read=timeout)

    async def chat(
        self,
        messages: ChatMessages,
        *,
        session_id: int | str | None = None,
        task_id: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        on_usage: UsageSink | None = None,
        **params: Any,
    ) -> ChatResult:
        """One completion."""
        body, headers = self._request(
            messages, session_id, task_id, tools, params, False, extra_headers
        )
        response = await self._open(body, headers)
        try:
            return _result(loads(await response.read()), bool(tools), on_usage)
        except aiohttp.ClientError as exc:
            raise LLMError(f"model answer broke off: {exc}") from exc
        finally:
            response.release()

    async def stream_chat(
        self,
        messages: ChatMessages,
        *,
        session_id: int | str | None = None,
        task_id: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        on_usage: UsageSink | None = None,
        **params: Any,
    ) -> AsyncGenerator[ChatResult, None]:
        """One streamed completion, as snapshots so far."""
        body, headers = self._request(
            messages, session_id, task_id, tools, params, True, extra_headers
        )
        turn, events = StreamAccumulator(), SSEDecoder()
        response = await self._open(body, headers)
        try:
            async for raw in response.content:
                data = events.feed(raw.decode())
                if data == DONE:
                    break
                if data is not None and turn.add(loads(data)):
                    yield turn.result(bool(tools))
        except aiohttp.ClientError as exc:
            raise LLMError(f"model stream broke: {exc}") from exc
        finally:
            response.release()
        if on_usage is not None:
            on_usage(turn.usage)
        yield turn.result(bool(tools))

    async def _open(self, body: bytes, headers: dict[str, str]) -> aiohttp.ClientResponse:
        session, attempt = self._session(), 0
        while True:
            try:
                response = await session.post(
                    self._target, data=body, headers=headers, timeout=self.timeout
                )
            except (aiohttp.ClientError, TimeoutError) as exc:
                error = LLMError(f"model server unreachable: {exc!r}")
            else:
                if response.status < 400:
                    return response
                error = error_from_response(
                    response.status, await response.read(), response.headers.get("Retry-After")
                )
                response.release()
            wait = self._retry_in(error, attempt)
            if wait is None:
                raise error
            await asyncio.sleep(wait)
            attempt += 1

    def _session(self) -> aiohttp.ClientSession:
        if self.session is None:
            self.session = aiohttp.ClientSession()
        return self.session

    async def close(self) -> None:
        if self._own_session and self.session is not None:
            await self.session.close()
            self.session = None
