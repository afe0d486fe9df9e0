"""Agent.__call__: inputs, memory order, forward, reply wrapping, parsing, LLM arguments."""

from __future__ import annotations

import json
from typing import Any

import pytest
from scripted_llm import AsyncScriptedLLM, scripted

from taskyard.agentkit.agents import (
    Agent,
    AgentError,
    AsyncAgent,
    EmptyReplyError,
    NotSynchronousError,
)
from taskyard.agentkit.aggregators import NativeToolAggregator
from taskyard.agentkit.memory import Memory, MemoryManager
from taskyard.agentkit.parsers import NativeToolCallParser
from taskyard.agentkit.schema import ActionReturn, AgentMessage, LLMResponse, ToolCall


def test_the_issue_example() -> None:
    llm = scripted("Hello")
    agent = Agent(llm, system_prompt="Answer in one word.")
    reply = agent(AgentMessage(sender="user", content="hi"), session_id=7)
    assert (reply.sender, reply.content) == ("Agent", "Hello")
    assert agent.memory is not None
    assert [m.content for m in agent.memory.get_memory(7)] == ["hi", "Hello"]
    state = agent.state_dict(7)
    assert json.loads(json.dumps(state)) == state
    assert [m["content"] for m in state["memory"]] == ["hi", "Hello"]
    assert llm.calls[0].messages == [
        {"role": "system", "content": "Answer in one word."},
        {"role": "user", "content": "hi"},
    ]
    assert llm.calls[0].session_id == 7
    agent.reset(7)
    assert agent.memory.get_memory(7) == []


def test_memory_grows_in_order_across_calls_and_feeds_the_prompt() -> None:
    llm = scripted("a1", "a2")
    agent = Agent(llm, name="bot")
    agent("q1", session_id=1)
    agent("q2", AgentMessage(sender="critic", content="shorter"), session_id=1)
    assert agent.memory is not None
    history = agent.memory.get_memory(1)
    assert [(m.sender, m.content) for m in history] == [
        ("user", "q1"),
        ("bot", "a1"),
        ("user", "q2"),
        ("critic", "shorter"),
        ("bot", "a2"),
    ]
    assert llm.calls[1].messages == [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "q2\nshorter"},
    ]


def test_list_inputs_are_flattened_and_bad_inputs_refused() -> None:
    agent = Agent(scripted("ok"))
    agent(["a", AgentMessage(content="b")], session_id=0)
    assert agent.memory is not None
    assert [m.content for m in agent.memory.get_memory()][:2] == ["a", "b"]
    with pytest.raises(TypeError, match="AgentMessage or str"):
        agent(42)  # type: ignore[arg-type]


def test_caller_message_is_not_aliased_into_memory() -> None:
    agent = Agent(scripted("ok"))
    message = AgentMessage(content="original")
    agent(message)
    message.content = "changed by caller"
    assert agent.memory is not None
    assert agent.memory.get_memory()[0].content == "original"


class Upper(Agent):
    """A custom forward returning plain content: __call__ wraps it in a message."""

    def forward(self, *messages: AgentMessage, session_id: Any = 0, **kwargs: Any) -> str:
        return str(messages[-1].content).upper()


def test_plain_forward_return_is_wrapped_as_a_message_from_the_agent() -> None:
    agent = Upper(name="shout")
    reply = agent("hey", session_id="s")
    assert (reply.sender, reply.content) == ("shout", "HEY")
    assert agent.memory is not None
    assert agent.memory.get_memory("s")[-1] == reply


def test_forward_returning_an_unsupported_type_raises_type_error() -> None:
    class Bad(Agent):
        def forward(self, *messages: AgentMessage, session_id: Any = 0, **kw: Any) -> object:
            return object()

    with pytest.raises(TypeError, match="forward returned object"):
        Bad()("x")


def test_parser_output_goes_to_formatted_and_tools_reach_the_llm() -> None:
    call = ToolCall(id="c1", name="IPythonInterpreter", parameters='{"command": "1+1"}')
    response = LLMResponse(text="", tool_calls=[call], finish_reason="tool_calls", usage={"x": 1})
    tools = [{"type": "function", "function": {"name": "IPythonInterpreter"}}]
    llm = scripted(response)
    agent = Agent(llm, output_format=NativeToolCallParser(), tools=tools, name="bot")
    reply = agent("compute", session_id=1, task_id="t9")
    assert reply.formatted == {
        "tool_calls": [{"id": "c1", "name": "IPythonInterpreter", "parameters": {"command": "1+1"}}]
    }
    assert reply.extra_info == {"finish_reason": "tool_calls", "usage": {"x": 1}}
    assert llm.calls[0].params == {"tools": tools, "task_id": "t9"}


def test_without_parser_native_tool_calls_are_still_kept() -> None:
    call = ToolCall(id="c1", name="FinishAction", parameters={})
    reply = Agent(scripted(LLMResponse(tool_calls=[call])))("go")
    assert reply.formatted == {"tool_calls": [call.model_dump()]}


def test_tool_loop_round_trip_through_the_native_aggregator() -> None:
    call = ToolCall(id="c1", name="IPythonInterpreter", parameters={"command": "1+1"})
    llm = scripted(LLMResponse(tool_calls=[call]), "The answer is 2.")
    agent = Agent(
        llm, name="bot", output_format=NativeToolCallParser(), aggregator=NativeToolAggregator()
    )
    agent("1+1?", session_id=1)
    result = ActionReturn(result=[{"type": "text", "content": "2"}])
    tool_message = AgentMessage(
        sender="IPythonInterpreter", content=result, extra_info={"tool_call_id": "c1"}
    )
    final = agent(tool_message, session_id=1)
    assert final.content == "The answer is 2."
    roles = [m["role"] for m in llm.calls[1].messages]
    assert roles == ["user", "assistant", "tool"]
    assert llm.calls[1].messages[2] == {"role": "tool", "tool_call_id": "c1", "content": "2"}


def test_recent_n_memory_window_limits_the_prompt() -> None:
    llm = scripted("a1", "a2")
    agent = Agent(llm, memory=MemoryManager(recent_n=1))
    agent("q1")
    agent("q2")
    assert llm.calls[1].messages == [{"role": "user", "content": "q2"}]


def test_dict_configs_are_refused() -> None:
    # Lagent's dict(type=...) configs: here components are typed objects.
    with pytest.raises(TypeError, match="llm must be a constructed object"):
        Agent({"type": "GPTAPI", "model_type": "gpt-4"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="aggregator must be a constructed object"):
        Agent(scripted(), aggregator={"type": "DefaultAggregator"})  # type: ignore[arg-type]


def test_agent_without_llm_says_so() -> None:
    with pytest.raises(AgentError, match="has no llm"):
        Agent()("hi")


def test_sync_agent_with_async_llm_raises_not_synchronous() -> None:
    with pytest.raises(NotSynchronousError, match="sync agent 'bot'"):
        Agent(AsyncScriptedLLM("x"), name="bot")("hi")


async def test_empty_streaming_forward_raises() -> None:
    class Silent(AsyncAgent):
        async def forward(self, *messages: AgentMessage, session_id: Any = 0, **kw: Any):  # type: ignore[override]
            for _ in ():
                yield ""

    with pytest.raises(EmptyReplyError):
        await Silent()("x")


async def test_async_agent_with_sync_llm_works() -> None:
    reply = await AsyncAgent(scripted("fine"))("hi", session_id=2)
    assert reply.content == "fine"


def test_memory_none_means_no_memory() -> None:
    # As in Lagent: each call sees only its own inputs, and nothing is kept.
    llm = scripted("a1", "a2")
    agent = Agent(llm, memory=None)
    agent("q1", session_id=1)
    agent("q2", session_id=1)
    assert agent.memory is None
    assert llm.calls[1].messages == [{"role": "user", "content": "q2"}]
    assert agent.state_dict(1) == {}
    agent.reset(1)


def test_a_memoryless_parent_keeps_only_its_sub_agents_state() -> None:
    parent = Agent(scripted(), memory=None)
    parent.child = Agent(scripted())
    parent.child("hi", session_id=2)
    assert list(parent.state_dict(2)) == ["child.memory"]


def test_single_session_memory_is_refused_at_construction() -> None:
    with pytest.raises(TypeError, match=r"holds a single session.*pass MemoryManager\(\)"):
        Agent(scripted(), memory=Memory())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"memory must be per-session \(MemoryManager\(\)"):
        Agent(scripted(), memory=[])  # type: ignore[arg-type]


def test_a_component_class_instead_of_an_instance_is_refused() -> None:
    with pytest.raises(TypeError, match="memory must be a constructed object"):
        Agent(scripted(), memory=MemoryManager)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="aggregator must be a constructed object"):
        Agent(scripted(), aggregator=NativeToolAggregator)  # type: ignore[arg-type]
