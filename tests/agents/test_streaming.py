"""Streaming: STREAM_ING messages with the text so far, then one END; memory keeps the END."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from scripted_llm import AsyncScriptedLLM, scripted

from taskyard.agentkit.agents import Agent, AsyncAgent, AsyncStreamingAgent, StreamingAgent
from taskyard.agentkit.hooks import Hook
from taskyard.agentkit.parsers import NativeToolCallParser
from taskyard.agentkit.schema import AgentMessage, AgentStatusCode, LLMResponse, ToolCall

ING, END = AgentStatusCode.STREAM_ING, AgentStatusCode.END


def states(messages: list[AgentMessage]) -> list[tuple[AgentStatusCode, object]]:
    return [(m.stream_state, m.content) for m in messages]


def test_streaming_agent_yields_text_so_far_then_one_end() -> None:
    agent = StreamingAgent(scripted("one two three"), name="bot")
    messages = list(agent.stream("go", session_id=1))
    assert states(messages) == [(ING, "one"), (ING, "one two"), (ING, "one two three"),
                                (END, "one two three")]  # fmt: skip
    assert all(m.sender == "bot" for m in messages)
    assert agent.memory is not None
    assert states(agent.memory.get_memory(1)) == [(END, "go"), (END, "one two three")]


def test_streaming_agent_call_returns_only_the_reply() -> None:
    reply = StreamingAgent(scripted("a b"))("go")
    assert (reply.stream_state, reply.content) == (END, "a b")


async def test_async_streaming_agent_with_tool_calls() -> None:
    call = ToolCall(id="c1", name="IPythonInterpreter", parameters='{"command": "1"}')
    llm = AsyncScriptedLLM(LLMResponse(text="Let me run", tool_calls=[call]))
    agent = AsyncStreamingAgent(llm, name="bot", output_format=NativeToolCallParser())
    messages = [m async for m in agent.stream("go", session_id=2)]
    assert states(messages) == [(ING, "Let"), (ING, "Let me"), (ING, "Let me run"),
                                (END, "Let me run")]  # fmt: skip
    assert messages[-1].formatted["tool_calls"][0]["parameters"] == {"command": "1"}
    assert agent.memory is not None
    assert agent.memory.get_memory(2)[-1] == messages[-1]


def test_non_streaming_agent_stream_gives_just_the_reply() -> None:
    assert states(list(Agent(scripted("x y")).stream("go"))) == [(END, "x y")]


def test_after_hooks_see_only_the_final_message() -> None:
    seen: list[AgentStatusCode] = []

    class Watch(Hook):
        def after_agent(self, agent: Any, message: AgentMessage, session_id: Any) -> None:
            seen.append(message.stream_state)

    list(StreamingAgent(scripted("a b c"), hooks=[Watch()]).stream("go"))
    assert seen == [END]


class Countdown(Agent):
    """A custom streaming forward: yield text so far, the last item is the reply."""

    def forward(self, *messages: AgentMessage, session_id: Any = 0, **kw: Any) -> Iterator[str]:
        yield "3"
        yield "3 2"
        yield "3 2 1"


class AsyncCountdown(AsyncAgent):
    async def forward(  # type: ignore[override]
        self, *messages: AgentMessage, session_id: Any = 0, **kw: Any
    ) -> AsyncIterator[str | AgentMessage]:
        yield "3"
        yield AgentMessage(sender="clock", content="3 2 1", formatted={"done": True})


def test_custom_generator_forward_streams() -> None:
    agent = Countdown()
    assert states(list(agent.stream("go"))) == [(ING, "3"), (ING, "3 2"), (ING, "3 2 1"),
                                                (END, "3 2 1")]  # fmt: skip
    assert agent("again").content == "3 2 1"


async def test_async_custom_forward_ending_with_a_message() -> None:
    messages = [m async for m in AsyncCountdown().stream("go")]
    assert states(messages) == [(ING, "3"), (END, "3 2 1")]
    assert messages[-1].formatted == {"done": True}
