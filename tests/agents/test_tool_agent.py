"""ToolAgent / AsyncToolAgent: the in-process tool loop over part B's executors."""

from __future__ import annotations

import asyncio

import pytest
from scripted_llm import AsyncScriptedLLM, scripted

from taskyard.agentkit.actions import ActionExecutor, AsyncActionExecutor, BaseAction, text_result
from taskyard.agentkit.agents import AsyncToolAgent, NotSynchronousError, ToolAgent, TurnLimitError
from taskyard.agentkit.schema import ActionReturn, LLMResponse, ToolCall


class Adder(BaseAction):
    """Add two integers."""

    def run(self, a: int, b: int) -> ActionReturn:
        """Add.

        Args:
            a: the first number
            b: the second number
        """
        return ActionReturn(result=text_result(str(a + b)))


def asks(*calls: tuple[str, str]) -> LLMResponse:
    return LLMResponse(tool_calls=[ToolCall(id=i, name="Adder", parameters=p) for i, p in calls])


def test_tool_agent_runs_calls_until_the_model_answers() -> None:
    llm = scripted(asks(("c1", '{"a": 2, "b": 3}'), ("c2", '{"a": 1, "b": 1}')), "5 and 2")
    agent = ToolAgent(llm, ActionExecutor([Adder()]), name="calc")
    reply = agent("add things", session_id=1)
    assert (reply.sender, reply.content) == ("calc", "5 and 2")
    assert llm.calls[0].params["tools"][0]["function"]["name"] == "Adder"
    second = llm.calls[1].messages
    assert [m["role"] for m in second] == ["user", "assistant", "tool", "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in second[2:]] == [("c1", "5"), ("c2", "2")]
    state = agent.state_dict(1)
    assert [m["sender"] for m in state["model.memory"]] == [
        "user",
        "calc",
        "Adder",
        "Adder",
        "calc",
    ]
    assert [m["content"] for m in state["memory"]] == ["add things", "5 and 2"]


def test_bad_arguments_go_back_to_the_model() -> None:
    llm = scripted(asks(("c1", '{"a": "x"}')), "sorry")
    ToolAgent(llm, ActionExecutor([Adder()]))("add")
    tool_message = llm.calls[1].messages[-1]
    assert tool_message["role"] == "tool"
    assert "a" in tool_message["content"] and tool_message["content"] != ""


def test_turn_limit_stops_the_run_with_a_clear_error() -> None:
    llm = scripted(*[asks((f"c{n}", '{"a": 1, "b": 1}')) for n in range(3)])
    with pytest.raises(TurnLimitError, match="no final answer after 2 tool turns"):
        ToolAgent(llm, ActionExecutor([Adder()]), max_turns=2)("loop")


class SlowAdder(Adder):
    """Add two integers, asynchronously."""

    name = "Adder"

    async def run(self, a: int, b: int) -> ActionReturn:  # type: ignore[override]
        """Add.

        Args:
            a: the first number
            b: the second number
        """
        await asyncio.sleep(0)
        return ActionReturn(result=text_result(str(a + b)))


def test_sync_tool_agent_refuses_an_executor_that_suspends() -> None:
    llm = scripted(asks(("c1", '{"a": 1, "b": 1}')))
    with pytest.raises(NotSynchronousError):
        ToolAgent(llm, AsyncActionExecutor([SlowAdder()]))("x")


async def test_async_tool_agent() -> None:
    llm = AsyncScriptedLLM(asks(("c1", '{"a": 40, "b": 2}')), "42")
    agent = AsyncToolAgent(llm, AsyncActionExecutor([Adder()]), name="calc")
    reply = await agent("6*7 the hard way", session_id="s")
    assert reply.content == "42"
    assert llm.calls[1].messages[-1] == {"role": "tool", "tool_call_id": "c1", "content": "42"}
