"""A subclassing example: few-shot examples in front of the conversation.

Any aggregator is extended the same way: call the parent's `aggregate`, then reshape its
output (or override `render` to change how one memory message looks)::

    aggregator = FewShotAggregator(examples=[
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4"},
    ])
    agent = Agent(llm, aggregator=aggregator)

The examples go after the system messages and before the session's messages, so the system
prompt stays first and the examples never enter memory.
"""

from __future__ import annotations

from collections.abc import Sequence

from taskyard.agentkit.aggregators.default import ChatMessage, DefaultAggregator, SystemPrompt
from taskyard.agentkit.parsers.base import OutputParser
from taskyard.agentkit.schema import AgentMessage

__all__ = ["FewShotAggregator"]


class FewShotAggregator(DefaultAggregator):
    """`DefaultAggregator` with fixed example chat messages in front of the conversation."""

    def __init__(self, examples: Sequence[ChatMessage]) -> None:
        self.examples = [dict(example) for example in examples]

    def aggregate(
        self,
        messages: Sequence[AgentMessage],
        name: str,
        parser: OutputParser | None = None,
        system_prompt: SystemPrompt | None = None,
    ) -> list[ChatMessage]:
        chat = super().aggregate(messages, name, parser, system_prompt)
        head = next((i for i, m in enumerate(chat) if m["role"] != "system"), len(chat))
        # Copies, so a caller editing the request cannot change the examples.
        return [*chat[:head], *(dict(e) for e in self.examples), *chat[head:]]
