"""What agents need from a model client: `chat` and `stream_chat`, sync or async.

`chat` returns the text, or an `LLMResponse` (text and native tool calls) when `tools` are
given. `stream_chat` yields the same shapes as snapshots so far; the last one is complete.
`session_id` (and `task_id`) travel with every request, so the proxy can keep a session on one
replica and tell whose task a call serves. `extra_headers` are added to the request (over the
client's own, the bearer credential included); `on_usage` is told the call's token usage.
`temperature`, `max_tokens`, `top_p` and `stop` replace the client's defaults for the call;
None keeps them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any, Protocol, runtime_checkable

from taskyard.agentkit.schema import LLMResponse

__all__ = ["AsyncChatModel", "ChatMessages", "ChatModel", "ChatResult", "UsageSink"]

ChatMessages = list[dict[str, Any]]
ChatResult = str | LLMResponse

# Told the token usage of a completed call (an empty dict when the server reported none);
# a call's text result has no room for it.
UsageSink = Callable[[dict[str, int]], None]


@runtime_checkable
class ChatModel(Protocol):
    def chat(
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
    ) -> ChatResult: ...

    def stream_chat(
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
    ) -> Iterator[ChatResult]: ...


@runtime_checkable
class AsyncChatModel(Protocol):
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
    ) -> ChatResult: ...

    def stream_chat(
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
    ) -> AsyncIterator[ChatResult]: ...
