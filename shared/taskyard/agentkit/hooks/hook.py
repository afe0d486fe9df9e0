"""Agent hooks: code that runs around every agent call (executors have `ActionHook`, beside).

A hook method may be a plain function or a coroutine function; async agents await it, and
sync agents run it to completion (a coroutine that truly suspends there raises a clear error).
What a hook returns, as in Lagent: a falsy value (None, False, ``[]``) keeps the messages; an
`AgentMessage` replaces them (from `before_agent`, a sequence of messages too); anything else
is a `TypeError` saying what is allowed. Agents take only `Hook` objects, executors only
`ActionHook` ones, checked when the hook is registered.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from itertools import count
from typing import Any

__all__ = ["Hook", "RemovableHandle"]


class Hook:
    """Base class with no-op methods; override the ones you need.

    `before_agent` sees the inputs before they reach memory (so the agent's memory holds the
    history without them); `after_agent` sees the reply after it reached memory.
    """

    def before_agent(self, agent: Any, messages: list[Any], session_id: int | str) -> Any:
        return None

    def after_agent(self, agent: Any, message: Any, session_id: int | str) -> Any:
        return None


class RemovableHandle:
    """What `register_hook` returns: `remove()` unregisters the hook (also as a context manager)."""

    _ids = count()

    def __init__(self, hooks: MutableMapping[int, Any]) -> None:
        self._hooks = hooks
        self.id = next(self._ids)

    def remove(self) -> None:
        """Unregister the hook; removing twice is harmless."""
        self._hooks.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.remove()
