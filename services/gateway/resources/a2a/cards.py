"""Agent Cards: what an A2A client reads before it calls an agent.

The default agent's card is served at `/.well-known/agent-card.json`, a registered agent's at
`/a2a/{agent}/.well-known/agent-card.json`; each points at its JSON-RPC endpoint (`/v1/a2a`,
`/v1/a2a/{agent}`), lists the agent's tools as its skills, says what taskyard supports
(streaming, push notifications) and asks for the tenant's API key as a Bearer token."""

from __future__ import annotations

import importlib.metadata
import inspect
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)

from services.gateway import default_agent
from taskyard.agentkit.agents import AGENTS, build_agent
from taskyard.agentkit.agents.as_tool import tool_schemas
from taskyard.agentkit.spec import AgentSpec
from taskyard.plumbing.settings import ModelSettings

__all__ = ["SCHEME", "agent_card", "rpc_path"]

SCHEME = "bearer"  # the security scheme's name in the card
_CONTEXTS = "Messages of one contextId share memory and interpreter."
_INPUT_MODES = ["text/plain", "application/json"]
_OUTPUT_MODES = ["text/plain", "application/json", "image/png", "image/jpeg", "image/svg+xml",
                 "text/html"]  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Described:
    """What a card says of an agent: its description, and its tools' OpenAI entries."""

    description: str
    tools: tuple[dict[str, Any], ...]


def rpc_path(agent: str | None) -> str:
    """The agent's JSON-RPC endpoint, as a path."""
    return "/v1/a2a" if agent is None else f"/v1/a2a/{agent}"


def agent_card(base_url: str, agent: str | None, settings: ModelSettings) -> AgentCard:
    """The card of `agent` (a registered name; None: the default agent), its endpoint under
    `base_url` (the gateway's own, as the client reached it)."""
    described = _described(agent, settings)
    url = base_url.rstrip("/") + rpc_path(agent)
    bearer = HTTPAuthSecurityScheme(
        scheme="bearer", description="The tenant's API key (TASKYARD_API_KEYS)."
    )
    return AgentCard(
        name=agent or default_agent.NAME,
        description=described.description,
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        version=importlib.metadata.version("taskyard"),
        capabilities=AgentCapabilities(streaming=True, push_notifications=True),
        security_schemes={SCHEME: SecurityScheme(http_auth_security_scheme=bearer)},
        security_requirements=[SecurityRequirement(schemes={SCHEME: StringList()})],
        default_input_modes=_INPUT_MODES,
        default_output_modes=_OUTPUT_MODES,
        skills=[_skill(tool["function"]) for tool in described.tools],
    )


def _skill(function: dict[str, Any]) -> AgentSkill:
    name = str(function["name"])
    return AgentSkill(id=name, name=name, description=str(function.get("description") or name),
                      tags=["tool"])  # fmt: skip


@lru_cache(maxsize=256)
def _described(agent: str | None, settings: ModelSettings) -> _Described:
    """Plugins register their agents at start-up, so what one is does not change: built once
    (its model client makes no connection until it is called) and read."""
    if agent is None:
        about = f"{default_agent.DESCRIPTION} {_CONTEXTS}"
        return _Described(about, tuple(tool_schemas(default_agent.spec().tools)))
    built = build_agent(AgentSpec(agent=agent), settings)
    tools = {  # its sub-agents' too, each tool once
        tool["function"]["name"]: tool
        for _, node in built.named_agents()
        for tool in getattr(node, "tools", None) or []
    }
    about = built.description or inspect.getdoc(AGENTS.get(agent)) or f"The {agent} agent."
    return _Described(about.strip().split("\n\n", 1)[0], tuple(tools.values()))
