"""Executor hooks: code that runs on each tool call before and after the action."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING

from shared.schema import AgentMessage

if TYPE_CHECKING:
    from shared.actions.executor import AsyncActionExecutor

__all__ = ["ActionHook"]


class ActionHook:
    """Override either method (a plain or a coroutine function). A falsy return keeps the
    message as it is; an `AgentMessage` replaces it."""

    def before_action(
        self, executor: AsyncActionExecutor, message: AgentMessage, session_id: str
    ) -> AgentMessage | Awaitable[AgentMessage | None] | None:
        """Rewrite the tool-call message before the executor reads it."""
        return None

    def after_action(
        self, executor: AsyncActionExecutor, message: AgentMessage, session_id: str
    ) -> AgentMessage | Awaitable[AgentMessage | None] | None:
        """Rewrite the result message before the executor returns it."""
        return None
