"""`build_agent`: the agent a task's `AgentSpec` asks for, ready for the agent worker."""

from __future__ import annotations

from typing import Any

import aiohttp

from taskyard.agentkit.agents.agent import AsyncAgent
from taskyard.agentkit.agents.as_tool import tool_schemas
from taskyard.agentkit.agents.registry import AGENTS
from taskyard.agentkit.agents.streaming import AsyncStreamingAgent
from taskyard.agentkit.aggregators import NativeToolAggregator
from taskyard.agentkit.llms import AsyncChatModel, AsyncOpenAIChat
from taskyard.agentkit.parsers import NativeToolCallParser
from taskyard.agentkit.spec import AgentSpec
from taskyard.plumbing.settings import ModelSettings

__all__ = ["build_agent", "default_llm"]

# Spec fields a registered agent receives as constructor overrides when the task sets them.
_OVERRIDABLE = ("name", "system_prompt")


def default_llm(
    spec: AgentSpec, settings: ModelSettings, session: aiohttp.ClientSession | None = None
) -> AsyncOpenAIChat:
    """The OpenAI-compatible client for the spec's model, through the configured proxy.

    Pass `session` to share one connection pool between the clients of a process."""
    return AsyncOpenAIChat(
        base_url=settings.llm_base_url,
        model=spec.model or settings.default_model,
        api_key=settings.llm_api_key,
        timeout=settings.llm_timeout_s,
        temperature=spec.temperature,
        session=session,
    )


def build_agent(
    spec: AgentSpec, settings: ModelSettings, *, llm: AsyncChatModel | None = None
) -> AsyncAgent:
    """The registered agent `spec.agent` names, or else the default tool-using agent: native
    tool calls over the spec's tools, streaming its text. `llm` replaces the default client."""
    llm = llm or default_llm(spec, settings)
    if spec.agent is not None:
        return _registered(spec, llm)
    return AsyncStreamingAgent(
        llm,
        name=spec.name,
        system_prompt=spec.system_prompt,
        aggregator=NativeToolAggregator(),
        output_format=NativeToolCallParser(),
        tools=tool_schemas(spec.tools) or None,
    )


def _registered(spec: AgentSpec, llm: AsyncChatModel) -> AsyncAgent:
    assert spec.agent is not None
    overrides: dict[str, Any] = {
        field: getattr(spec, field) for field in _OVERRIDABLE if field in spec.model_fields_set
    }
    if "tools" in spec.model_fields_set:
        overrides["tools"] = tool_schemas(spec.tools)
    agent = AGENTS.get(spec.agent)(llm=llm, **overrides)
    if not isinstance(agent, AsyncAgent):
        raise TypeError(
            f"registered agent {spec.agent!r} built {agent!r}; the services need an AsyncAgent"
        )
    return agent
