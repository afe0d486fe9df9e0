"""A call accepts the keywords its `forward` declares; any other is a TypeError naming it,
raised before anything runs (Lagent passed it on into the model's request body)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Unpack

import pytest
from scripted_llm import ScriptedLLM, scripted

from taskyard.agentkit.actions import ActionExecutor
from taskyard.agentkit.agents import (
    Agent,
    AsyncAgent,
    AsyncStreamingAgent,
    AsyncToolAgent,
    BaseAgent,
    LLMParams,
    StreamingAgent,
    ToolAgent,
)
from taskyard.agentkit.schema import AgentMessage


async def call(agent: BaseAgent, **kwargs: Any) -> AgentMessage:
    result = agent("hi", session_id=1, **kwargs)  # type: ignore[operator]
    return await result if isinstance(result, Awaitable) else result


async def stream(agent: BaseAgent, **kwargs: Any) -> AgentMessage:
    messages = agent.stream("hi", session_id=1, **kwargs)  # type: ignore[attr-defined]
    if hasattr(messages, "__aiter__"):
        return [m async for m in messages][-1]
    return list(messages)[-1]


def tool_agent(llm: ScriptedLLM) -> ToolAgent:
    return ToolAgent(llm, ActionExecutor([]))


def async_tool_agent(llm: ScriptedLLM) -> AsyncToolAgent:
    return AsyncToolAgent(llm, ActionExecutor([]))  # type: ignore[arg-type]


AGENTS: list[Callable[[ScriptedLLM], BaseAgent]] = [
    Agent,
    AsyncAgent,
    StreamingAgent,
    AsyncStreamingAgent,
    tool_agent,
    async_tool_agent,
]
PATHS = [call, stream]


@pytest.mark.parametrize("make", AGENTS)
@pytest.mark.parametrize("path", PATHS)
async def test_an_unknown_keyword_is_refused_before_anything_runs(make: Any, path: Any) -> None:
    llm = scripted("ok")
    agent = make(llm)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'bogus'"):
        await path(agent, bogus=1)
    assert llm.calls == []
    assert agent.memory is not None and 1 not in agent.memory


def test_stream_refuses_an_unknown_keyword_when_called_not_when_iterated() -> None:
    with pytest.raises(TypeError, match="'max_new_tokens'"):
        StreamingAgent(scripted()).stream("hi", max_new_tokens=5)


@pytest.mark.parametrize("make", AGENTS)
@pytest.mark.parametrize("path", PATHS)
async def test_declared_llm_params_reach_the_model_and_none_keeps_its_default(
    make: Any, path: Any
) -> None:
    llm = scripted("ok")
    await path(make(llm), task_id="t1", temperature=0.2, max_tokens=None)
    params = {k: v for k, v in llm.calls[0].params.items() if k != "tools"}
    assert params == {"task_id": "t1", "temperature": 0.2}


def test_a_forward_that_passes_unknown_keywords_on_does_not_reach_the_model() -> None:
    class Loose(Agent):
        def forward(self, *messages: AgentMessage, session_id: Any = 0, **kwargs: Any) -> Any:
            return super().forward(*messages, session_id=session_id, **kwargs)

    llm = scripted("ok")
    with pytest.raises(TypeError, match="forward got an unexpected keyword argument 'seed'"):
        Loose(llm)("hi", seed=3)
    assert llm.calls == []


class Styled(Agent):
    """Declares one keyword of its own and the model's parameters."""

    def forward(
        self,
        *messages: AgentMessage,
        session_id: Any = 0,
        style: str = "plain",
        **params: Unpack[LLMParams],
    ) -> str:
        return f"{style}:{messages[-1].content}:{sorted(params)}"


def test_a_custom_forward_declares_what_its_call_accepts() -> None:
    agent = Styled()
    assert agent("x", style="bold", task_id="t").content == "bold:x:['task_id']"
    with pytest.raises(TypeError, match=r"'colour' \(it accepts session_id and max_tokens"):
        agent("x", colour="red")


def test_a_bare_kwargs_forward_accepts_any_keyword() -> None:
    class Open(Agent):
        def forward(self, *messages: AgentMessage, session_id: Any = 0, **kwargs: Any) -> str:
            return ",".join(sorted(kwargs))

    assert Open()("x", anything=1, goes=2).content == "anything,goes"
