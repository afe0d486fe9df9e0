"""OpenAI-compatible chat clients on the official SDK: any server, any model name.

Both clients share `shared.llms.wire`; each method here is only the SDK call and the error
translation, so the sync and async forms cannot drift apart.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from shared.llms.base import ChatMessages, ChatResult
from shared.llms.errors import LLMError
from shared.llms.wire import (
    StreamAccumulator,
    post_args,
    request_args,
    session_headers,
    to_result,
)

__all__ = ["AsyncOpenAIChat", "OpenAIChat"]

_PATH = "/chat/completions"


class _ChatConfig:
    """Model, default generation parameters, and the request builder both clients use."""

    def __init__(
        self,
        model: str,
        temperature: float | None,
        max_tokens: int | None,
        top_p: float | None,
        stop: list[str] | None,
    ) -> None:
        self.model = model
        given = {"temperature": temperature, "max_tokens": max_tokens, "top_p": top_p, "stop": stop}
        self.params = {k: v for k, v in given.items() if v is not None}

    def _args(
        self,
        messages: ChatMessages,
        session_id: int | str | None,
        task_id: str | None,
        tools: list[dict[str, Any]] | None,
        params: dict[str, Any],
        stream: bool,
    ) -> dict[str, Any]:
        return request_args(
            self.model,
            messages,
            tools=tools,
            params={**self.params, **params},
            headers=session_headers(session_id, task_id),
            stream=stream,
        )


class OpenAIChat(_ChatConfig):
    """Blocking client: ``OpenAIChat(base_url=..., model=...)``.

    `chat` returns the text, or an `LLMResponse` when `tools` are given; `stream_chat`
    yields snapshots of the same (the text so far), the last one complete.
    Errors are raised as `LLMError`.
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
        client: openai.OpenAI | None = None,
    ) -> None:
        super().__init__(model, temperature, max_tokens, top_p, stop)
        self.client = client or openai.OpenAI(
            base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries
        )

    def chat(
        self,
        messages: ChatMessages,
        *,
        session_id: int | str | None = None,
        task_id: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        **params: Any,
    ) -> ChatResult:
        """One completion."""
        args = self._args(messages, session_id, task_id, tools, params, stream=False)
        try:
            completion = self.client.post(_PATH, cast_to=ChatCompletion, **post_args(args))
        except openai.OpenAIError as exc:
            raise LLMError.from_openai(exc) from exc
        return to_result(completion, bool(tools))

    def stream_chat(
        self,
        messages: ChatMessages,
        *,
        session_id: int | str | None = None,
        task_id: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        **params: Any,
    ) -> Iterator[ChatResult]:
        """One streamed completion, as snapshots so far."""
        args = self._args(messages, session_id, task_id, tools, params, stream=True)
        turn = StreamAccumulator()
        try:
            stream = self.client.post(
                _PATH,
                cast_to=ChatCompletion,
                stream=True,
                stream_cls=openai.Stream[ChatCompletionChunk],
                **post_args(args),
            )
            with stream:
                for chunk in stream:
                    if turn.add(chunk):
                        yield turn.result(bool(tools))
        except openai.OpenAIError as exc:
            raise LLMError.from_openai(exc) from exc
        yield turn.result(bool(tools))

    def close(self) -> None:
        self.client.close()


class AsyncOpenAIChat(_ChatConfig):
    """The async twin of `OpenAIChat`: same arguments, same results, awaited."""

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
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        super().__init__(model, temperature, max_tokens, top_p, stop)
        self.client = client or openai.AsyncOpenAI(
            base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries
        )

    async def chat(
        self,
        messages: ChatMessages,
        *,
        session_id: int | str | None = None,
        task_id: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        **params: Any,
    ) -> ChatResult:
        """One completion."""
        args = self._args(messages, session_id, task_id, tools, params, stream=False)
        try:
            completion = await self.client.post(_PATH, cast_to=ChatCompletion, **post_args(args))
        except openai.OpenAIError as exc:
            raise LLMError.from_openai(exc) from exc
        return to_result(completion, bool(tools))

    async def stream_chat(
        self,
        messages: ChatMessages,
        *,
        session_id: int | str | None = None,
        task_id: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        **params: Any,
    ) -> AsyncIterator[ChatResult]:
        """One streamed completion, as snapshots so far."""
        args = self._args(messages, session_id, task_id, tools, params, stream=True)
        turn = StreamAccumulator()
        try:
            stream = await self.client.post(
                _PATH,
                cast_to=ChatCompletion,
                stream=True,
                stream_cls=openai.AsyncStream[ChatCompletionChunk],
                **post_args(args),
            )
            async with stream:
                async for chunk in stream:
                    if turn.add(chunk):
                        yield turn.result(bool(tools))
        except openai.OpenAIError as exc:
            raise LLMError.from_openai(exc) from exc
        yield turn.result(bool(tools))

    async def close(self) -> None:
        await self.client.close()
