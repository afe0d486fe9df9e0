"""The agent package's errors.

AgentError
├── NotSynchronousError   a sync agent met something that must be awaited
└── EmptyReplyError       forward produced nothing

UnknownSessionWarning     `state_dict` of a session the agent does not hold (a UserWarning)
"""

from __future__ import annotations

from taskyard.errors import TaskyardError

__all__ = ["AgentError", "EmptyReplyError", "NotSynchronousError", "UnknownSessionWarning"]


class AgentError(TaskyardError):
    """Base of the agent package's errors."""


class NotSynchronousError(AgentError, TypeError):
    """A sync agent (or a sync use of an async core) awaited something that truly suspends:
    an async LLM client, hook or sub-agent. Use the `Async` twin instead."""


class EmptyReplyError(AgentError):
    """`forward` returned an empty stream, so there is no reply to remember."""


class UnknownSessionWarning(UserWarning):
    """`state_dict` was asked for a session that no memory of the agent tree holds."""
