"""Streaming agents: `forward` streams the model's text, so `stream()` yields it live.

``for message in agent.stream(...)`` gives ``STREAM_ING`` messages with the text so far, then
one ``END`` reply; memory stores only the reply. ``agent(...)`` still returns the reply.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Unpack

from taskyard.agentkit.agents.agent import Agent, AsyncAgent
from taskyard.agentkit.agents.drive import iter_sync
from taskyard.agentkit.agents.params import LLMParams
from taskyard.agentkit.memory import SessionId
from taskyard.agentkit.schema import AgentMessage

__all__ = ["AsyncStreamingAgent", "StreamingAgent"]


class StreamingAgent(Agent):
    """`Agent` whose default `forward` calls ``llm.stream_chat``."""

    def forward(
        self, *messages: AgentMessage, session_id: SessionId = 0, **params: Unpack[LLMParams]
    ) -> Iterator[str | AgentMessage]:
        stream = self._generate_stream(messages, session_id, dict(params))
        return iter_sync(stream, self._owner())


class AsyncStreamingAgent(AsyncAgent):
    """`AsyncAgent` whose default `forward` calls ``llm.stream_chat``."""

    def forward(  # type: ignore[override]
        self, *messages: AgentMessage, session_id: SessionId = 0, **params: Unpack[LLMParams]
    ) -> AsyncIterator[str | AgentMessage]:
        return self._generate_stream(messages, session_id, dict(params))
