"""Executor hooks: code that runs on each tool call before and after the action."""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import Any, Protocol

from taskyard.agentkit.schema import AgentMessage

__all__ = ["ActionHook", "HookedExecutor"]


class HookedExecutor(Protocol):
    """What an `ActionHook` is handed: the executor running the call (an
    `AsyncActionExecutor`), named by what a hook may read of it, so hooks need no import of
    the executor, which imports them."""

    @property
    def actions(self) -> Mapping[str, Any]: ...

    def tool_schemas(self) -> list[dict[str, Any]]: ...


class ActionHook:
    """Override either method (a plain or a coroutine function). A falsy return keeps the
    message as it is; an `AgentMessage` replaces it."""

    def before_action(
        self, executor: HookedExecutor, message: AgentMessage, session_id: str
    ) -> AgentMessage | Awaitable[AgentMessage | None] | None:
        """Rewrite the tool-call message before the executor reads it."""
        return None

    def after_action(
        self, executor: HookedExecutor, message: AgentMessage, session_id: str
    ) -> AgentMessage | Awaitable[AgentMessage | None] | None:
        """Rewrite the result message before the executor returns it."""
        return None
