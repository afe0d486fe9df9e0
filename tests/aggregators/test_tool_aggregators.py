"""The native tool aggregator (assistant tool_calls, role tool) and the text tool aggregator."""

from __future__ import annotations

import json

from taskyard.agentkit.aggregators import NativeToolAggregator, TextToolAggregator
from taskyard.agentkit.schema import ActionReturn, AgentMessage, ToolCall


def call_turn(*calls: ToolCall, text: str = "") -> AgentMessage:
    return AgentMessage(
        sender="bot", content=text, formatted={"tool_calls": [c.model_dump() for c in calls]}
    )


def result(call_id: str, text: str, tool: str = "IPythonInterpreter") -> AgentMessage:
    content = ActionReturn(type=tool, result=[{"type": "text", "content": text}])
    return AgentMessage(sender=tool, content=content, extra_info={"tool_call_id": call_id})


CALLS = (
    ToolCall(id="c1", name="IPythonInterpreter", parameters={"command": "1+1"}),
    ToolCall(id="c2", name="WebBrowser.search", parameters='{"query": "x"}'),
)


def test_native_tool_calls_and_results() -> None:
    history = [
        AgentMessage(content="go"),
        call_turn(*CALLS),
        result("c1", "2"),
        result("c2", "hit"),
    ]
    history.append(AgentMessage(sender="bot", content="done"))
    chat = NativeToolAggregator().aggregate(history, "bot", system_prompt="S")
    assert [m["role"] for m in chat] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assistant = chat[2]
    assert assistant["content"] is None
    assert assistant["tool_calls"][0] == {
        "id": "c1",
        "type": "function",
        "function": {"name": "IPythonInterpreter", "arguments": json.dumps({"command": "1+1"})},
    }
    assert assistant["tool_calls"][1]["function"]["arguments"] == '{"query": "x"}'
    assert chat[3] == {"role": "tool", "tool_call_id": "c1", "content": "2"}
    assert chat[4] == {"role": "tool", "tool_call_id": "c2", "content": "hit"}


def test_native_keeps_text_next_to_calls() -> None:
    chat = NativeToolAggregator().aggregate([call_turn(CALLS[0], text="Let me run it.")], "bot")
    assert chat[0]["content"] == "Let me run it."


def test_native_drops_results_whose_call_is_outside_the_window() -> None:
    windowed = [result("c1", "2"), AgentMessage(content="next question")]
    chat = NativeToolAggregator().aggregate(windowed, "bot")
    assert chat == [{"role": "user", "content": "next question"}]


def test_a_growing_history_keeps_results_of_calls_made_steps_ago_and_drops_orphans() -> None:
    """A long session's step checks only its new messages: a result whose call an earlier
    step announced is kept, one whose call never was is dropped, as from scratch."""
    history = [result("c0", "cut off"), AgentMessage(content="go"), call_turn(*CALLS)]
    aggregator = NativeToolAggregator()
    assert [m["role"] for m in aggregator.aggregate(history, "bot")] == ["user", "assistant"]
    history += [result("c1", "2"), result("c9", "orphan"), result("c2", "hit")]
    chat = aggregator.aggregate(history, "bot")
    assert [m.get("tool_call_id") for m in chat if m["role"] == "tool"] == ["c1", "c2"]
    assert chat == NativeToolAggregator().aggregate(history, "bot")


def test_native_renders_a_tool_message_without_call_id_as_user_text() -> None:
    stray = AgentMessage(sender="IPythonInterpreter", content=ActionReturn(errmsg="lost state"))
    chat = NativeToolAggregator().aggregate([stray], "bot")
    assert chat == [{"role": "user", "content": "lost state"}]


def test_text_tool_results_become_user_text_and_merge() -> None:
    history = [
        AgentMessage(content="compute"),
        AgentMessage(sender="bot", content="```python\n1+1\n```"),
        result("c1", "2"),
        result("c2", "3", tool="Other"),
    ]
    chat = TextToolAggregator().aggregate(history, "bot")
    assert chat == [
        {"role": "user", "content": "compute"},
        {"role": "assistant", "content": "```python\n1+1\n```"},
        {"role": "user", "content": "Result of IPythonInterpreter:\n2\nResult of Other:\n3"},
    ]


def test_text_tool_role_and_template_are_configurable() -> None:
    aggregator = TextToolAggregator(role="environment", template="<output>{result}</output>")
    chat = aggregator.aggregate([result("c1", "2")], "bot")
    assert chat == [{"role": "environment", "content": "<output>2</output>"}]
