"""Tool-using agents for library use: the model turn and the tool calls looped in process.

(The services do not run this loop: there, one agent call is one step, and the tool calls go
out as Celery jobs. Both use the same model turn: native tool calls, `NativeToolAggregator`.)
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable
from typing import Any, Protocol, Unpack

from taskyard.agentkit.agents.agent import Agent, AsyncAgent
from taskyard.agentkit.agents.base import BaseAgent
from taskyard.agentkit.agents.drive import resolve, run_sync
from taskyard.agentkit.agents.errors import AgentError
from taskyard.agentkit.agents.params import LLMParams
from taskyard.agentkit.aggregators import NativeToolAggregator, SystemPrompt
from taskyard.agentkit.hooks import Hook
from taskyard.agentkit.llms import AsyncChatModel, ChatModel
from taskyard.agentkit.memory import SessionId
from taskyard.agentkit.parsers import NativeToolCallParser
from taskyard.agentkit.schema import AgentMessage, ToolCall

__all__ = ["AsyncToolAgent", "ToolAgent", "ToolExecutor", "TurnLimitError"]


class ToolExecutor(Protocol):
    """What `ActionExecutor` / `AsyncActionExecutor` offer: run one call, describe the tools."""

    def __call__(
        self, message: AgentMessage | ToolCall, session_id: str = ...
    ) -> AgentMessage | Awaitable[AgentMessage]: ...

    def tool_schemas(self) -> list[dict[str, Any]]: ...


class TurnLimitError(AgentError):
    """The model still asked for tools after `max_turns` turns."""

    def __init__(self, name: str, max_turns: int) -> None:
        super().__init__(f"{name}: no final answer after {max_turns} tool turns")
        self.max_turns = max_turns


class _ToolLoop(BaseAgent):
    """The loop, once: model turn; while it asks for tools, run them and give it the results.

    The sub-agent ``model`` keeps the full transcript (calls and results); this agent's own
    memory keeps the inputs and the final answer.
    """

    _model_class: type[Agent | AsyncAgent]  # the model turn's agent: sync or async

    def __init__(
        self,
        llm: ChatModel | AsyncChatModel,
        executor: ToolExecutor,
        *,
        name: str | None = None,
        system_prompt: SystemPrompt | None = None,
        max_turns: int = 8,
        hooks: Iterable[Hook] = (),
    ) -> None:
        super().__init__(name=name, hooks=hooks)
        self.executor = executor
        self.max_turns = max_turns
        self.model = self._model_class(
            llm,
            name=self.name,
            system_prompt=system_prompt,
            aggregator=NativeToolAggregator(),
            output_format=NativeToolCallParser(),
            tools=executor.tool_schemas(),
        )

    async def _loop(
        self, messages: tuple[AgentMessage, ...], session_id: SessionId, kwargs: dict[str, Any]
    ) -> AgentMessage:
        inputs: tuple[AgentMessage, ...] = messages
        for _ in range(self.max_turns):
            reply = await resolve(self.model(*inputs, session_id=session_id, **kwargs))
            calls = reply.tool_calls
            if not calls:
                return reply
            # One call after another, so the sync agent can run this same loop.
            inputs = tuple([await resolve(self.executor(c, str(session_id))) for c in calls])
        raise TurnLimitError(self.name, self.max_turns)


class ToolAgent(_ToolLoop, Agent):
    """Blocking tool agent: ``ToolAgent(OpenAIChat(...), ActionExecutor([...]))``."""

    _model_class = Agent

    def forward(
        self, *messages: AgentMessage, session_id: SessionId = 0, **params: Unpack[LLMParams]
    ) -> AgentMessage:
        return run_sync(self._loop(messages, session_id, dict(params)), self._owner())


class AsyncToolAgent(_ToolLoop, AsyncAgent):
    """Async tool agent: ``AsyncToolAgent(AsyncOpenAIChat(...), AsyncActionExecutor([...]))``."""

    _model_class = AsyncAgent

    async def forward(
        self, *messages: AgentMessage, session_id: SessionId = 0, **params: Unpack[LLMParams]
    ) -> AgentMessage:
        return await self._loop(messages, session_id, dict(params))
