"""Agents offered to other agents as tools: ``"tools": ["agent:researcher"]``.

The model calls ``agent:researcher`` with a `task` (and optionally a `session_id`); the
services run it as a child task of its own (its own id, the same tenant, its own session
unless the call names one) and the child's answer comes back as the call's result. The
functions here are the vocabulary: names, the OpenAI tool entry, every tool a spec offers.
"""

from __future__ import annotations

from typing import Any

from taskyard.agentkit.actions import openai_tool_schemas, tool_names
from taskyard.agentkit.agents.registry import AGENTS
from taskyard.plumbing import keys

__all__ = [
    "AGENT_TOOL_PREFIX",
    "agent_of",
    "agent_tool_schema",
    "is_agent_tool",
    "offered_tool_names",
    "tool_schemas",
]

AGENT_TOOL_PREFIX = keys.AGENT_TOOL_PREFIX


def is_agent_tool(name: str) -> bool:
    return name.startswith(AGENT_TOOL_PREFIX)


def agent_of(name: str) -> str:
    """The registered agent an agent tool's name names."""
    return name.removeprefix(AGENT_TOOL_PREFIX)


def agent_tool_schema(name: str) -> dict[str, Any]:
    """The OpenAI tool entry of a registered agent; `RegistryError` if none is registered."""
    agent = agent_of(name)
    AGENTS.get(agent)  # raises for an unknown agent
    about = f"Ask the {agent} agent to do a task; its final answer is this tool's result."
    parameters = {
        "type": "object",
        "properties": {
            "task": {"type": "string", "description": "What the agent is to do, in full."},
            "session_id": {
                "type": "string",
                "description": "A session for it to work in (its memory and interpreter); "
                "a new one if left out.",
            },
        },
        "required": ["task"],
    }
    return {"type": "function", "function": {"name": name, "description": about,
                                             "parameters": parameters}}  # fmt: skip


def tool_schemas(names: list[str]) -> list[dict[str, Any]]:
    """OpenAI tool entries for a spec's tools: registered actions and registered agents."""
    schemas: list[dict[str, Any]] = []
    for name in names:
        schemas += [agent_tool_schema(name)] if is_agent_tool(name) else openai_tool_schemas([name])
    return schemas


def offered_tool_names() -> list[str]:
    """Every name a task's tools may list: actions, their APIs, and registered agents."""
    return sorted([*tool_names(), *(AGENT_TOOL_PREFIX + name for name in AGENTS)])
