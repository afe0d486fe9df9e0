"""Sequential and AsyncSequential: a message piped through agents, each with its memory."""

from __future__ import annotations

from typing import Any

import pytest
from scripted_llm import AsyncScriptedLLM, scripted

from taskyard.agentkit.agents import Agent, AsyncAgent, AsyncSequential, Sequential
from taskyard.agentkit.schema import AgentMessage


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


@pytest.mark.parametrize(
    ("exit_at", "content"),
    [(None, "xabc"), (0, "xa"), (1, "xab"), (2, "xabc"), (4, "xabcab")],
)
def test_exit_at_stops_after_that_step_going_round_past_the_end(
    exit_at: int | None, content: str
) -> None:
    # Lagent's semantics: exit_at is the index of the last step; past the last agent the
    # message goes round to the first again.
    pipeline = Sequential(Suffix("a"), Suffix("b"), Suffix("c"))
    assert pipeline("x", session_id=1, exit_at=exit_at).content == content


async def test_async_sequential_takes_exit_at_on_call_and_stream() -> None:
    pipeline = AsyncSequential(Suffix("a"), Suffix("b"))
    assert (await pipeline("x", exit_at=0)).content == "xa"
    replies = [m async for m in pipeline.stream("y", session_id=2, exit_at=2)]
    assert replies[-1].content == "yaba"


def test_exit_at_must_be_a_step_index() -> None:
    pipeline = Sequential(Suffix("a"))
    with pytest.raises(ValueError, match="cannot be -1"):
        pipeline("x", exit_at=-1)
    with pytest.raises(TypeError, match="exit_at is the index"):
        pipeline("x", exit_at="last")  # type: ignore[arg-type]


def test_sequential_passes_other_keywords_to_every_agent_and_refuses_unknown_ones() -> None:
    first, second = scripted("draft"), scripted("final")
    pipeline = Sequential(Agent(first, name="w"), Agent(second, name="e"))
    pipeline("topic", task_id="t7", exit_at=1)
    assert first.calls[0].params == second.calls[0].params == {"task_id": "t7"}
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        pipeline("topic", session_id=9, bogus=1)
    assert len(first.calls) == 1 and 9 not in pipeline.memory  # type: ignore[operator]


class Styled(Agent):
    def forward(self, *messages: AgentMessage, session_id: Any = 0, style: str = "") -> str:
        return f"{messages[-1].content}{style}"


async def test_a_keyword_is_accepted_only_when_every_agent_in_the_chain_takes_it() -> None:
    assert Sequential(Styled(), Styled())("x", style="!").content == "x!!"
    mixed = AsyncSequential(Styled(), Agent(scripted()))
    with pytest.raises(TypeError, match="'style'"):
        mixed.stream("x", style="!")
    with pytest.raises(TypeError, match="'task_id'"):
        await mixed("x", task_id="t")
