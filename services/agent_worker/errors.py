"""The agent worker's errors.

TaskyardError (taskyard.errors)
└── AgentWorkerError
    ├── StepCancelled          the task was cancelled while its step ran
    ├── McpToolsUnavailable    an MCP server of the task's spec could not be listed
    └── ModelCallOutsideStep   a model call no step owns (also a RuntimeError)
"""

from __future__ import annotations

from taskyard.errors import TaskyardError

__all__ = ["AgentWorkerError"]


class AgentWorkerError(TaskyardError):
    """Base of the agent worker's errors."""
