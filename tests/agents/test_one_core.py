"""Lagent wrote __call__ four times (sync, async, streaming, async streaming) and the copies
drifted. Here all four drive one core: the same hooks, memory and reply, step for step."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from scripted_llm import AsyncScriptedLLM, scripted

from taskyard.agentkit.agents import (
    Agent,
    AsyncAgent,
    AsyncStreamingAgent,
    BaseAgent,
    StreamingAgent,
)
from taskyard.agentkit.hooks import Hook
from taskyard.agentkit.schema import AgentMessage


class Journal(Hook):
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def before_agent(self, agent: BaseAgent, messages: list[AgentMessage], session_id: Any) -> None:
        history = agent.memory.get_memory(session_id)  # type: ignore[union-attr]
        self.log.append(f"before {len(history)} {[m.content for m in messages]}")

    def after_agent(self, agent: BaseAgent, message: AgentMessage, session_id: Any) -> None:
        history = agent.memory.get_memory(session_id)  # type: ignore[union-attr]
        self.log.append(f"after {len(history)} {message.content} {message.stream_state.name}")


async def sync_call(agent: Any) -> AgentMessage:
    return agent("hi there", session_id=1)


async def async_call(agent: Any) -> AgentMessage:
    return await agent("hi there", session_id=1)


async def sync_stream(agent: Any) -> AgentMessage:
    return list(agent.stream("hi there", session_id=1))[-1]


async def async_stream(agent: Any) -> AgentMessage:
    return [m async for m in agent.stream("hi there", session_id=1)][-1]


DRIVES: list[tuple[Callable[[], BaseAgent], Callable[[Any], Any]]] = [
    (lambda: Agent(scripted("fine thanks"), name="bot"), sync_call),
    (lambda: AsyncAgent(AsyncScriptedLLM("fine thanks"), name="bot"), async_call),
    (lambda: StreamingAgent(scripted("fine thanks"), name="bot"), sync_stream),
    (lambda: AsyncStreamingAgent(AsyncScriptedLLM("fine thanks"), name="bot"), async_stream),
]


@pytest.mark.parametrize(("make", "drive"), DRIVES, ids=["sync", "async", "stream", "astream"])
async def test_every_drive_runs_the_same_core(
    make: Callable[[], BaseAgent], drive: Callable[[Any], Any]
) -> None:
    log: list[str] = []
    agent = make()
    agent.register_hook(Journal(log))
    reply = await drive(agent)
    assert (reply.sender, reply.content, reply.stream_state.name) == ("bot", "fine thanks", "END")
    assert log == ["before 0 ['hi there']", "after 2 fine thanks END"]
    assert agent.state_dict(1)["memory"] == [
        AgentMessage(sender="user", content="hi there").model_dump(mode="json"),
        reply.model_dump(mode="json"),
    ]
