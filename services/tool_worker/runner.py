"""One tool call: the registered actions, run by one `ActionExecutor` per worker process."""

from __future__ import annotations

import threading

from shared.actions import ActionExecutor, ActionResources
from shared.sandbox import SandboxProvider
from shared.schema import AgentMessage, ToolCall
from shared.settings import Settings

__all__ = ["run_tool_call"]

# Built on first use and kept: the actions hold per-session state (search results) and the
# provider holds the sessions' interpreters. The entry keeps its key objects alive, so an id
# is never reused for a different provider while the entry exists.
_executors: dict[tuple[int, int], tuple[SandboxProvider, Settings, ActionExecutor]] = {}
_lock = threading.Lock()


def run_tool_call(
    call: ToolCall, *, session_key: str, sandboxes: SandboxProvider, settings: Settings
) -> AgentMessage:
    """Run the call for the session ("tenant:session_id"); failures come back in the
    `ActionReturn`, and the reply quotes the call's id."""
    return _executor(sandboxes, settings)(call, session_key)


def _executor(sandboxes: SandboxProvider, settings: Settings) -> ActionExecutor:
    key = (id(sandboxes), id(settings))
    with _lock:
        if key not in _executors:
            resources = ActionResources(settings=settings, sandboxes=sandboxes)
            _executors[key] = (sandboxes, settings, ActionExecutor.from_registry(resources))
        return _executors[key][2]
