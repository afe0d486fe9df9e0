"""Hooks around agent calls (`Hook`) and tool calls (`ActionHook`), and the handle that
removes one."""

from shared.agentkit.hooks.action_hook import ActionHook, HookedExecutor
from shared.agentkit.hooks.hook import Hook, RemovableHandle

__all__ = ["ActionHook", "Hook", "HookedExecutor", "RemovableHandle"]
