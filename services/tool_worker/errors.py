"""The tool worker's errors.

TaskyardError (taskyard.errors)
└── ToolWorkerError
    └── CallFailed    the worker could not run a tool call, and a retry may
"""

from __future__ import annotations

from taskyard.errors import TaskyardError

__all__ = ["CallFailed", "ToolWorkerError"]


class ToolWorkerError(TaskyardError):
    """Base of the tool worker's errors."""


class CallFailed(ToolWorkerError):
    """The worker's own trouble running a call (not the tool's: that is in its result); the
    job is to be tried again. `cause` is what went wrong."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(f"the tool call could not run: {type(cause).__name__}: {cause}")
        self.cause = cause
