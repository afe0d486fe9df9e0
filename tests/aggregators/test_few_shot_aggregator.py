"""The documented subclassing example: few-shot examples in front of the conversation."""

from __future__ import annotations

from taskyard.agentkit.aggregators import FewShotAggregator
from taskyard.agentkit.schema import AgentMessage

EXAMPLES = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]


def test_examples_sit_between_system_and_conversation() -> None:
    aggregator = FewShotAggregator(EXAMPLES)
    chat = aggregator.aggregate([AgentMessage(content="3+3?")], "bot", system_prompt="Math.")
    assert chat == [
        {"role": "system", "content": "Math."},
        *EXAMPLES,
        {"role": "user", "content": "3+3?"},
    ]


def test_examples_lead_without_system_prompt_and_stay_unchanged() -> None:
    aggregator = FewShotAggregator(EXAMPLES)
    chat = aggregator.aggregate([AgentMessage(content="q")], "bot")
    assert chat[:2] == EXAMPLES
    chat[0]["content"] = "edited"
    assert aggregator.aggregate([], "bot")[0]["content"] == "2+2?"
