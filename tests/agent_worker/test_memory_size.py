"""A memory's size in tokens is kept between steps: only what the memory gained is counted."""

from __future__ import annotations

from services.agent_worker.memory_size import MemorySize
from taskyard.agentkit.aggregators import ChatMessage, DefaultAggregator
from taskyard.agentkit.schema import AgentMessage
from taskyard.agentkit.token_count import count_tokens

MODEL = "scripted"


class _Spy(DefaultAggregator):
    def __init__(self) -> None:
        self.seen: list[AgentMessage] = []

    def rendered(self, message: AgentMessage, name: str) -> list[ChatMessage]:
        self.seen.append(message)
        return super().rendered(message, name)


def _messages(n: int, start: int = 0) -> list[AgentMessage]:
    return [AgentMessage(sender="user" if i % 2 == 0 else "agent", content=f"message {i} " * 5)
            for i in range(start, start + n)]  # fmt: skip


def _whole(messages: list[AgentMessage]) -> int:
    return sum(count_tokens(DefaultAggregator().render(m, "agent"), MODEL) for m in messages)


def test_a_growing_memory_is_counted_once_per_message() -> None:
    spy, size, memory = _Spy(), MemorySize(), _messages(10)
    assert size.count(memory, MODEL, "agent", spy) == _whole(memory)
    memory += _messages(3, start=10)
    spy.seen.clear()
    assert size.count(memory, MODEL, "agent", spy) == _whole(memory)
    assert spy.seen == memory[10:]  # the first ten were not counted again


def test_a_rewritten_memory_or_another_model_is_counted_again() -> None:
    spy, size, memory = _Spy(), MemorySize(), _messages(6)
    size.count(memory, MODEL, "agent", spy)
    rewritten = [m.model_copy() for m in memory]  # same text, other objects (reloaded)
    spy.seen.clear()
    assert size.count(rewritten, MODEL, "agent", spy) == _whole(rewritten)
    assert spy.seen == rewritten
    compacted = [AgentMessage(sender="user", content="a summary"), *rewritten[4:]]
    assert size.count(compacted, MODEL, "agent", spy) == _whole(compacted)
    spy.seen.clear()
    size.count(compacted, "another-model", "agent", spy)
    assert spy.seen == compacted
