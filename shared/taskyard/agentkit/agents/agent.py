"""`Agent` and `AsyncAgent`: the two ways to drive the one core in `BaseAgent`.

Users override `forward` (``def`` on `Agent`, ``async def`` on `AsyncAgent`), not `__call__`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterator
from typing import Any, Unpack

from taskyard.agentkit.agents.base import AgentInput, BaseAgent
from taskyard.agentkit.agents.drive import iter_sync, run_sync
from taskyard.agentkit.agents.params import LLMParams
from taskyard.agentkit.memory import SessionId
from taskyard.agentkit.schema import AgentMessage

__all__ = ["Agent", "AsyncAgent"]


class Agent(BaseAgent):
    """A blocking agent: ``reply = agent(message, session_id=7)``.

    The default `forward` aggregates the session's memory, calls ``llm.chat`` and parses the
    turn with `output_format`; a call accepts the `LLMParams` keywords (``task_id``,
    ``temperature``, ...) and passes them on. Every component it uses must be synchronous.
    """

    def __call__(
        self, *messages: AgentInput, session_id: SessionId = 0, **kwargs: Any
    ) -> AgentMessage:
        """Hooks, memory, `forward`: the reply as an `AgentMessage`."""
        return run_sync(self._reply(messages, session_id, kwargs), self._owner())

    def stream(
        self, *messages: AgentInput, session_id: SessionId = 0, **kwargs: Any
    ) -> Iterator[AgentMessage]:
        """The same call, yielding ``STREAM_ING`` messages (text so far), then the reply."""
        return iter_sync(self._run(messages, session_id, kwargs), self._owner())

    def forward(
        self, *messages: AgentMessage, session_id: SessionId = 0, **params: Unpack[LLMParams]
    ) -> AgentMessage | Any:
        return run_sync(self._generate(messages, session_id, dict(params)), self._owner())

    def _owner(self) -> str:
        return f"sync agent {self.name!r}"


class AsyncAgent(BaseAgent):
    """The async twin: ``reply = await agent(message, session_id=7)``.

    Hooks may be coroutine functions; they are awaited. Sync components work too.
    """

    async def __call__(
        self, *messages: AgentInput, session_id: SessionId = 0, **kwargs: Any
    ) -> AgentMessage:
        """Hooks, memory, `forward`: the reply as an `AgentMessage`."""
        return await self._reply(messages, session_id, kwargs)

    def stream(
        self, *messages: AgentInput, session_id: SessionId = 0, **kwargs: Any
    ) -> AsyncGenerator[AgentMessage, None]:
        """The same call, yielding ``STREAM_ING`` messages (text so far), then the reply."""
        return self._run(messages, session_id, kwargs)

    async def forward(
        self, *messages: AgentMessage, session_id: SessionId = 0, **params: Unpack[LLMParams]
    ) -> AgentMessage | Any:
        return await self._generate(messages, session_id, dict(params))
