"""Scripted model clients for agent-logic tests: they implement the client interface
(`chat`, `stream_chat`), answer from a script (else echo the last message) and record calls."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

from taskyard.agentkit.schema import LLMResponse


@dataclass
class Call:
    messages: list[dict[str, Any]]
    session_id: int | str | None
    params: dict[str, Any]


@dataclass
class ScriptedLLM:
    """Blocking fake: replies in order; `stream_chat` yields the text word by word so far."""

    replies: deque[str | LLMResponse] = field(default_factory=deque)
    calls: list[Call] = field(default_factory=list)

    def _answer(self, messages: list[dict[str, Any]], session_id: Any, params: Any) -> Any:
        self.calls.append(Call(messages, session_id, dict(params)))
        if self.replies:
            return self.replies.popleft()
        return f"echo: {messages[-1]['content']}" if messages else "echo"

    def chat(
        self, messages: list[dict[str, Any]], *, session_id: Any = None, **params: Any
    ) -> str | LLMResponse:
        return self._answer(messages, session_id, params)

    def stream_chat(
        self, messages: list[dict[str, Any]], *, session_id: Any = None, **params: Any
    ) -> Iterator[str | LLMResponse]:
        return iter(_snapshots(self._answer(messages, session_id, params)))


class AsyncScriptedLLM(ScriptedLLM):
    """Async fake; with `barrier` set, each call waits until that many calls are in flight."""

    def __init__(self, *replies: str | LLMResponse, barrier: int = 0) -> None:
        super().__init__(deque(replies))
        self.barrier = barrier
        self._arrived = 0
        self._all_in = asyncio.Event()

    async def _rendezvous(self) -> None:
        if self.barrier:
            self._arrived += 1
            if self._arrived >= self.barrier:
                self._all_in.set()
            await self._all_in.wait()
        await asyncio.sleep(0)  # a real suspension, as network I/O would do

    async def chat(  # type: ignore[override]
        self, messages: list[dict[str, Any]], *, session_id: Any = None, **params: Any
    ) -> str | LLMResponse:
        answer = self._answer(messages, session_id, params)
        await self._rendezvous()
        return answer

    async def stream_chat(  # type: ignore[override]
        self, messages: list[dict[str, Any]], *, session_id: Any = None, **params: Any
    ) -> AsyncIterator[str | LLMResponse]:
        answer = self._answer(messages, session_id, params)
        for snapshot in _snapshots(answer):
            await self._rendezvous()
            yield snapshot


def scripted(*replies: str | LLMResponse) -> ScriptedLLM:
    return ScriptedLLM(deque(replies))


def _snapshots(answer: str | LLMResponse) -> list[str | LLMResponse]:
    text = answer if isinstance(answer, str) else answer.text
    words = text.split(" ")
    so_far = [" ".join(words[: i + 1]) for i in range(len(words))]
    # The last snapshot is the complete turn, as the real clients give it.
    return [*so_far[:-1], answer]
