"""Registered agents: what a task names in ``AgentSpec.agent``.

A plugin module (listed in ``settings.plugin_modules``) registers an `AsyncAgent` subclass or a
factory function; `build_agent` calls it with ``llm=`` plus the fields the spec sets::

    @AGENTS.register()
    class Researcher(AsyncAgent): ...

    @AGENTS.register("team")
    def team(llm, **overrides): return AsyncSequential(Planner(llm), Writer(llm), **overrides)
"""

from __future__ import annotations

from collections.abc import Callable

from taskyard.agentkit.agents.base import BaseAgent
from taskyard.agentkit.registry import Registry

__all__ = ["AGENTS", "AgentFactory"]

AgentFactory = Callable[..., BaseAgent]

AGENTS: Registry[AgentFactory] = Registry("agent")
