"""What agents need from a model client: `chat` and `stream_chat`, sync or async.

`chat` returns the text, or an `LLMResponse` (text and native tool calls) when `tools` are
given. `stream_chat` yields the same shapes as snapshots so far; the last one is complete.
`session_id` (and `task_id`) travel with every request, so the proxy can keep a session on one
replica and tell whose task a call serves.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any, Protocol, runtime_checkable

from taskyard.agentkit.schema import LLMResponse

__all__ = ["AsyncChatModel", "ChatMessages", "ChatModel", "ChatResult"]

ChatMessages = list[dict[str, Any]]
ChatResult = str | LLMResponse


@runtime_checkable
class ChatModel(Protocol):
    def chat(
        self,
        messages: ChatMessages,
        *,
        session_id: int | str | None = None,
        tools: list[dict[str, Any]] | None = None,
        **params: Any,
    ) -> ChatResult: ...

    def stream_chat(
        self,
        messages: ChatMessages,
        *,
        session_id: int | str | None = None,
        tools: list[dict[str, Any]] | None = None,
        **params: Any,
    ) -> Iterator[ChatResult]: ...


@runtime_checkable
class AsyncChatModel(Protocol):
    async def chat(
        self,
        messages: ChatMessages,
        *,
        session_id: int | str | None = None,
        tools: list[dict[str, Any]] | None = None,
        **params: Any,
    ) -> ChatResult: ...

    def stream_chat(
        self,
        messages: ChatMessages,
        *,
        session_id: int | str | None = None,
        tools: list[dict[str, Any]] | None = None,
        **params: Any,
    ) -> AsyncIterator[ChatResult]: ...
