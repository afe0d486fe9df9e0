"""build_agent: the default tool-using agent from a spec, registered agents by name, and one
full tool round trip against the scripted OpenAI-compatible model over real HTTP."""

from __future__ import annotations

from typing import Any

import pytest
from scripted_llm import AsyncScriptedLLM

from devstack.scripted_model import ScriptedModelThread
from taskyard.agentkit.actions import openai_tool_schemas
from taskyard.agentkit.agents import (
    AGENTS,
    Agent,
    AsyncAgent,
    AsyncStreamingAgent,
    build_agent,
    default_llm,
)
from taskyard.agentkit.aggregators import NativeToolAggregator
from taskyard.agentkit.llms import AsyncOpenAIChat
from taskyard.agentkit.parsers import NativeToolCallParser
from taskyard.agentkit.registry import RegistryError
from taskyard.agentkit.schema import ActionReturn, AgentMessage, AgentStatusCode
from taskyard.agentkit.spec import AgentSpec
from taskyard.plumbing.settings import AgentWorkerSettings


@pytest.fixture
def settings() -> AgentWorkerSettings:
    return AgentWorkerSettings(llm_base_url="http://127.0.0.1:9/v1", default_model="house-model")


def test_default_agent_is_the_native_tool_agent(settings: AgentWorkerSettings) -> None:
    spec = AgentSpec(name="solver", system_prompt="Be exact.", tools=["IPythonInterpreter"])
    agent = build_agent(spec, settings, llm=AsyncScriptedLLM())
    assert isinstance(agent, AsyncStreamingAgent)
    assert agent.name == "solver"
    assert agent.system_prompt == "Be exact."
    assert isinstance(agent.aggregator, NativeToolAggregator)
    assert isinstance(agent.output_format, NativeToolCallParser)
    assert agent.tools == openai_tool_schemas(["IPythonInterpreter"])


def test_default_llm_follows_spec_and_settings(settings: AgentWorkerSettings) -> None:
    llm = default_llm(AgentSpec(temperature=0.2), settings)
    assert isinstance(llm, AsyncOpenAIChat)
    assert (llm.model, llm.params) == ("house-model", {"temperature": 0.2})
    assert llm.url == "http://127.0.0.1:9/v1/chat/completions"
    assert default_llm(AgentSpec(model="org/other"), settings).model == "org/other"


# Registered as a plugin module would do it (names unique to these tests).
@AGENTS.register("test_researcher")
class Researcher(AsyncAgent):
    def __init__(self, llm: Any, name: str = "researcher", **kwargs: Any) -> None:
        super().__init__(llm, name=name, system_prompt="Research.", **kwargs)


AGENTS.add("test_sync_agent", lambda llm, **kw: Agent(llm, **kw))


def test_registered_agent_gets_only_the_fields_the_spec_sets(settings: AgentWorkerSettings) -> None:
    llm = AsyncScriptedLLM()
    plain = build_agent(AgentSpec(agent="test_researcher"), settings, llm=llm)
    assert (plain.name, plain.system_prompt, plain.tools, plain.llm) == (
        "researcher", "Research.", None, llm)  # fmt: skip
    spec = AgentSpec(agent="test_researcher", name="r2", tools=["IPythonInterpreter"])
    custom = build_agent(spec, settings, llm=llm)
    assert custom.name == "r2"
    assert custom.tools == openai_tool_schemas(["IPythonInterpreter"])


def test_registered_sync_or_unknown_agents_are_refused(settings: AgentWorkerSettings) -> None:
    with pytest.raises(TypeError, match="need an AsyncAgent"):
        build_agent(AgentSpec(agent="test_sync_agent"), settings, llm=AsyncScriptedLLM())
    with pytest.raises(RegistryError, match="unknown agent 'nobody'"):
        build_agent(AgentSpec(agent="nobody"), settings, llm=AsyncScriptedLLM())


async def test_tool_round_trip_against_the_scripted_model() -> None:
    with ScriptedModelThread() as model:
        settings = AgentWorkerSettings(llm_base_url=model.base_url, default_model="scripted")
        agent = build_agent(AgentSpec(name="solver"), settings)
        call = await agent("What is 6 * 7?", session_id="s1", task_id="t1")
        calls = call.formatted["tool_calls"]
        assert [c["name"] for c in calls] == ["IPythonInterpreter"]
        assert calls[0]["parameters"] == {"command": "print(6 * 7)\n"}
        result = AgentMessage(
            sender="IPythonInterpreter",
            content=ActionReturn(result=[{"type": "text", "content": "42"}]),
            extra_info={"tool_call_id": calls[0]["id"]},
        )
        streamed = [m async for m in agent.stream(result, session_id="s1", task_id="t1")]
        await agent.llm.close()  # type: ignore[union-attr]
    assert streamed[-1].stream_state == AgentStatusCode.END
    assert streamed[-1].content.startswith("The result is: 42")
    assert all(m.stream_state == AgentStatusCode.STREAM_ING for m in streamed[:-1])
    assert len(streamed) > 2
    history = agent.memory.get_memory("s1")  # type: ignore[union-attr]
    assert [m.sender for m in history] == ["user", "solver", "IPythonInterpreter", "solver"]
