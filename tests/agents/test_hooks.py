"""Hooks: what they see (as in Lagent), replacing messages, removal, and async hooks awaited."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from scripted_llm import AsyncScriptedLLM, scripted

from shared.agents import Agent, AsyncAgent, BaseAgent, NotSynchronousError
from shared.hooks import Hook
from shared.schema import AgentMessage


class Spy(Hook):
    """Records what the agent's memory held when each hook ran."""

    def __init__(self) -> None:
        self.before: list[list[object]] = []
        self.after: list[list[object]] = []

    def before_agent(self, agent: BaseAgent, messages: list[AgentMessage], session_id: Any) -> None:
        assert agent.memory is not None
        self.before.append([m.content for m in agent.memory.get_memory(session_id)])

    def after_agent(self, agent: BaseAgent, message: AgentMessage, session_id: Any) -> None:
        assert agent.memory is not None
        self.after.append([m.content for m in agent.memory.get_memory(session_id)])


def test_before_sees_history_without_the_input_after_sees_both() -> None:
    spy = Spy()
    agent = Agent(scripted("r1", "r2"), hooks=[spy])
    agent("q1", session_id=1)
    agent("q2", session_id=1)
    assert spy.before == [[], ["q1", "r1"]]
    assert spy.after == [["q1", "r1"], ["q1", "r1", "q2", "r2"]]


class Rewrite(Hook):
    def before_agent(self, agent: Any, messages: list[AgentMessage], session_id: Any) -> Any:
        return [m.model_copy(update={"content": f"[{m.content}]"}) for m in messages]

    def after_agent(self, agent: Any, message: AgentMessage, session_id: Any) -> AgentMessage:
        message.content = f"{message.content}!"
        return message


def test_hooks_replace_messages_but_after_edits_do_not_reach_memory() -> None:
    llm = scripted("ok")
    agent = Agent(llm, hooks=[Rewrite()])
    reply = agent("q")
    assert llm.calls[0].messages == [{"role": "user", "content": "[q]"}]
    assert reply.content == "ok!"
    assert agent.memory is not None
    assert [m.content for m in agent.memory.get_memory()] == ["[q]", "ok"]


def test_hooks_run_in_registration_order() -> None:
    order: list[str] = []

    class Named(Hook):
        def __init__(self, name: str) -> None:
            self.name = name

        def before_agent(self, agent: Any, messages: Any, session_id: Any) -> None:
            order.append(self.name)

    agent = Agent(scripted("ok"), hooks=[Named("a")])
    agent.register_hook(Named("b"))
    agent("x")
    assert order == ["a", "b"]


def test_register_hook_returns_a_removable_handle() -> None:
    spy = Spy()
    agent = Agent(scripted())
    handle = agent.register_hook(spy)
    agent("a")
    handle.remove()
    handle.remove()  # twice is harmless
    agent("b")
    assert len(spy.before) == 1
    with agent.register_hook(spy):
        agent("c")
    agent("d")
    assert len(spy.before) == 2


def test_after_hook_returning_a_non_message_raises() -> None:
    class Broken(Hook):
        def after_agent(self, agent: Any, message: Any, session_id: Any) -> str:
            return "not a message"

    with pytest.raises(TypeError, match="after_agent hook"):
        Agent(scripted(), hooks=[Broken()])("x")


class AsyncTagger(Hook):
    """Async hook methods that truly suspend (as I/O would)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def before_agent(self, agent: Any, messages: list[AgentMessage], session_id: Any) -> Any:
        await asyncio.sleep(0)
        self.seen.append("before")
        return [m.model_copy(update={"content": f"tagged {m.content}"}) for m in messages]

    async def after_agent(self, agent: Any, message: AgentMessage, session_id: Any) -> AgentMessage:
        await asyncio.sleep(0)
        self.seen.append("after")
        return message.model_copy(update={"receiver": "audited"})


async def test_async_hooks_are_awaited_on_async_agents() -> None:
    # Lagent called async hooks without awaiting them: the coroutine replaced the message.
    hook = AsyncTagger()
    llm = AsyncScriptedLLM("done")
    reply = await AsyncAgent(llm, hooks=[hook])("q", session_id=3)
    assert hook.seen == ["before", "after"]
    assert llm.calls[0].messages == [{"role": "user", "content": "tagged q"}]
    assert reply.receiver == "audited"


def test_suspending_async_hook_on_a_sync_agent_raises_not_synchronous() -> None:
    with pytest.raises(NotSynchronousError):
        Agent(scripted(), hooks=[AsyncTagger()])("q")


def test_async_hook_that_never_suspends_runs_on_a_sync_agent() -> None:
    class Quick(Hook):
        async def after_agent(self, agent: Any, message: AgentMessage, session_id: Any) -> Any:
            return message.model_copy(update={"type": "checked"})

    assert Agent(scripted(), hooks=[Quick()])("q").type == "checked"
