"""The default agent: what a caller gets who names no registered agent (`AgentSpec()`, its
defaults: the settings' model, the code interpreter), offered on every stack. Defined once for
each protocol that serves it: A2A's default card, an MCP tool beside the registered agents."""

from __future__ import annotations

from taskyard.agentkit.spec import AgentSpec

__all__ = ["DESCRIPTION", "NAME", "spec"]

NAME = "taskyard"
DESCRIPTION = (
    "A tool-using agent: it plans, runs Python in a sandboxed interpreter and calls its "
    "other tools, and answers."
)


def spec() -> AgentSpec:
    """The default agent's spec (a new one each time: a spec is mutable)."""
    return AgentSpec()
