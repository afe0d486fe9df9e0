"""Sequential and AsyncSequential: a message piped through agents, each with its memory."""

from __future__ import annotations

from typing import Any

import pytest
from scripted_llm import AsyncScriptedLLM, scripted

from shared.agents import Agent, AsyncAgent, AsyncSequential, Sequential
from shared.schema import AgentMessage


class Suffix(Agent):
    def __init__(self, suffix: str) -> None:
        super().__init__(name=f"add{suffix}")
        self.suffix = suffix

    def forward(self, *messages: AgentMessage, session_id: Any = 0, **kw: Any) -> str:
        return f"{messages[-1].content}{self.suffix}"


def test_sequential_pipes_each_reply_into_the_next_agent() -> None:
    pipeline = Sequential(Suffix("a"), Suffix("b"), Suffix("c"), name="pipe")
    reply = pipeline("x", session_id=1)
    assert (reply.sender, reply.content) == ("addc", "xabc")
    assert len(pipeline) == 3
    assert pipeline[1].name == "addb"
    state = pipeline.state_dict(1)
    assert list(state) == ["memory", "0.memory", "1.memory", "2.memory"]
    assert [m["content"] for m in state["1.memory"]] == ["xa", "xab"]
    assert [m["content"] for m in state["memory"]] == ["x", "xabc"]


def test_sequential_refuses_async_agents_and_empty_chains() -> None:
    with pytest.raises(TypeError, match="Sequential takes Agent"):
        Sequential(Suffix("a"), AsyncAgent(AsyncScriptedLLM()))
    with pytest.raises(ValueError, match="at least one agent"):
        Sequential()


async def test_async_sequential_mixes_async_and_sync_agents() -> None:
    first = AsyncAgent(AsyncScriptedLLM("draft"), name="writer")
    second = Agent(scripted("final"), name="editor")
    pipeline = AsyncSequential(first, second)
    reply = await pipeline("topic", session_id="s")
    assert (reply.sender, reply.content) == ("editor", "final")
    assert [m.content for m in second.memory.get_memory("s")] == ["draft", "final"]  # type: ignore[union-attr]
