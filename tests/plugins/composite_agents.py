"""Composite agents the tests deploy as a plugin (``TASKYARD_PLUGIN_MODULES=
tests.plugins.composite_agents``): sub-agents with memories of their own and session values.

Their sub-agents' system prompts ask the scripted model to count the messages it is sent, so
a reply shows what each sub-agent's memory held: ``[5 messages] You said: ...``.
"""

from __future__ import annotations

from typing import Any, Unpack

from taskyard.agentkit.agents import (
    AGENTS,
    AgentList,
    AsyncAgent,
    AsyncSequential,
    LLMParams,
    SessionValues,
)
from taskyard.agentkit.schema import AgentMessage

__all__ = ["WriterCritic", "pipeline_pair"]

COUNT = "Count the messages you see."


@AGENTS.register("writer_critic")
class WriterCritic(AsyncAgent):
    """A writer, then a critic of its draft (in an `AgentList`), and a round counter: state
    keys ``memory``, ``writer.memory``, ``critics.0.memory`` and ``rounds``."""

    def __init__(self, llm: Any, **overrides: Any) -> None:
        super().__init__(llm, **{"name": "writer_critic", **overrides})
        self.writer = AsyncAgent(llm, name="writer", system_prompt=f"Write one line. {COUNT}")
        critic = AsyncAgent(llm, name="critic", system_prompt=f"Criticise the line. {COUNT}")
        self.critics = AgentList([critic])
        self.rounds = SessionValues(count=0)

    async def forward(
        self, *messages: AgentMessage, session_id: Any = 0, **params: Unpack[LLMParams]
    ) -> AgentMessage:
        rounds = self.rounds.get(session_id)
        rounds["count"] += 1
        draft = await self.writer(*messages, session_id=session_id, **params)
        review = await self.critics[0](draft, session_id=session_id, **params)  # type: ignore[operator]
        return AgentMessage(sender=self.name, content=f"round {rounds['count']}: {review.content}")


@AGENTS.register("pipeline_pair")
def pipeline_pair(llm: Any, **overrides: Any) -> AsyncSequential:
    """Two agents in a row (state keys ``memory``, ``0.memory``, ``1.memory``)."""
    first = AsyncAgent(llm, name="first", system_prompt=f"Draft. {COUNT}")
    second = AsyncAgent(llm, name="second", system_prompt=f"Polish. {COUNT}")
    return AsyncSequential(first, second, **{"name": "pipeline_pair", **overrides})
