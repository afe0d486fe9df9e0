"""Hooks: what they see (as in Lagent), replacing messages, removal, and async hooks awaited."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from scripted_llm import AsyncScriptedLLM, scripted

from taskyard.agentkit.actions import ActionHook
from taskyard.agentkit.agents import (
    Agent,
    AsyncAgent,
    AsyncStreamingAgent,
    BaseAgent,
    NotSynchronousError,
)
from taskyard.agentkit.hooks import Hook
from taskyard.agentkit.schema import AgentMessage


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


class Returns(Hook):
    """Both hook methods return a fixed value."""

    def __init__(self, before: Any = None, after: Any = None) -> None:
        self.before, self.after = before, after

    def before_agent(self, agent: Any, messages: Any, session_id: Any) -> Any:
        return self.before

    def after_agent(self, agent: Any, message: Any, session_id: Any) -> Any:
        return self.after


async def run(agent: BaseAgent, path: str, *inputs: Any) -> AgentMessage:
    """One call of `agent` by `path`: "call" or "stream", sync or async alike."""
    if path == "call":
        result = agent(*inputs, session_id=1)  # type: ignore[operator]
        return await result if asyncio.iscoroutine(result) else result
    messages = agent.stream(*inputs, session_id=1)  # type: ignore[attr-defined]
    if hasattr(messages, "__aiter__"):
        return [m async for m in messages][-1]
    return list(messages)[-1]


CALLS = [
    (Agent, "call"),
    (Agent, "stream"),
    (AsyncAgent, "call"),
    (AsyncStreamingAgent, "stream"),
]


@pytest.mark.parametrize(("kind", "path"), CALLS)
@pytest.mark.parametrize("falsy", [None, False, [], (), 0, ""])
async def test_a_falsy_hook_return_keeps_the_messages(kind: Any, path: str, falsy: Any) -> None:
    # Lagent's rule: `if result: message = result`. A [] used to drop the inputs here.
    llm = scripted("answer")
    reply = await run(kind(llm, hooks=[Returns(falsy, falsy)]), path, "question")
    assert llm.calls[0].messages == [{"role": "user", "content": "question"}]
    assert reply.content == "answer"


@pytest.mark.parametrize(("kind", "path"), CALLS)
async def test_before_may_return_one_message_or_a_sequence(kind: Any, path: str) -> None:
    one, two = AgentMessage(content="one"), AgentMessage(content="two")
    for replacement, expected in [(one, "one"), ((one, two), "one\ntwo")]:
        llm = scripted("ok")
        await run(kind(llm, hooks=[Returns(before=replacement)]), path, "question")
        assert llm.calls[0].messages == [{"role": "user", "content": expected}]


@pytest.mark.parametrize(("kind", "path"), CALLS)
@pytest.mark.parametrize("value", ["text", [AgentMessage(content="ok"), "text"], 42])
async def test_before_returning_anything_else_says_what_is_allowed(
    kind: Any, path: str, value: Any
) -> None:
    agent = kind(scripted(), hooks=[Returns(before=value)])
    with pytest.raises(TypeError, match=r"an AgentMessage or a sequence of them .* or a falsy"):
        await run(agent, path, "question")


@pytest.mark.parametrize(("kind", "path"), CALLS)
@pytest.mark.parametrize("value", ["not a message", [AgentMessage(content="x")], True])
async def test_after_returning_anything_else_says_what_is_allowed(
    kind: Any, path: str, value: Any
) -> None:
    agent = kind(scripted(), hooks=[Returns(after=value)])
    with pytest.raises(TypeError, match=r"after_agent hook returns an AgentMessage .* or a falsy"):
        await run(agent, path, "question")


def test_agents_refuse_hooks_of_the_wrong_kind_at_registration() -> None:
    with pytest.raises(TypeError, match="an ActionHook goes to an executor's register_hook"):
        Agent(scripted()).register_hook(ActionHook())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"agents take taskyard\.agentkit\.hooks\.Hook objects"):
        Agent(scripted(), hooks=[object()])  # type: ignore[list-item]


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
