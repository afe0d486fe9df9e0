"""A custom agent, deployable by configuration: a unit expert with few-shot examples.

It shows the three things a user customises without changing any service:

- an aggregator subclass (`FewShotToolAggregator`) that puts worked examples in front of the
  conversation, while keeping native tool calls and tool results as the model expects them;
- a `forward` override that post-processes the model's final answer;
- registration by name (`@AGENTS.register`), so a task can ask for it: ``{"agent": "unit_expert"}``.

Deploy it with ``TASKYARD_PLUGIN_MODULES=examples.custom_agent,examples.custom_action`` for the
gateway and both workers, and a tool worker on ``tools.UnitConverter``. The test
`tests/plugins/test_plugins_through_gateway.py` does exactly that with the local stack.
"""

from __future__ import annotations

from typing import Any

import examples.custom_action  # noqa: F401 - registers the UnitConverter action the agent uses
from taskyard.agentkit.actions import openai_tool_schemas
from taskyard.agentkit.agents import AGENTS, AsyncAgent
from taskyard.agentkit.aggregators import FewShotAggregator, NativeToolAggregator
from taskyard.agentkit.parsers import NativeToolCallParser
from taskyard.agentkit.schema import AgentMessage

__all__ = ["EXAMPLES", "FewShotToolAggregator", "UnitExpert"]

SIGNATURE = "(checked by unit_expert)"

EXAMPLES: list[dict[str, Any]] = [
    {"role": "user", "content": "How many metres is 3 feet?"},
    {"role": "assistant", "content": "3 ft = 0.9144 m."},
]


class FewShotToolAggregator(FewShotAggregator, NativeToolAggregator):
    """Worked examples after the system prompt (`FewShotAggregator`), over native tool calls
    and tool results (`NativeToolAggregator`): each adds its part through `super()`."""


@AGENTS.register("unit_expert")
class UnitExpert(AsyncAgent):
    """Answers unit questions with the UnitConverter tool, and signs its final answers."""

    def __init__(self, llm: Any, **overrides: Any) -> None:
        options: dict[str, Any] = {
            "name": "unit_expert",
            "system_prompt": "You convert units. Use the UnitConverter tool; be exact.",
            "tools": openai_tool_schemas(["UnitConverter"]),
            **overrides,
        }
        super().__init__(
            llm,
            aggregator=FewShotToolAggregator(EXAMPLES),
            output_format=NativeToolCallParser(),
            **options,
        )

    async def forward(self, *messages: AgentMessage, session_id: Any = 0, **kwargs: Any) -> Any:
        reply = await super().forward(*messages, session_id=session_id, **kwargs)
        if isinstance(reply, AgentMessage) and not reply.formatted:
            return reply.model_copy(update={"content": f"{reply.content} {SIGNATURE}"})
        return reply
