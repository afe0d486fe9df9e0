"""Hooks around agent calls (`Hook`) and tool calls (`ActionHook`), and the handle that
removes one."""

from taskyard.agentkit.hooks.action_hook import ActionHook, HookedExecutor
from taskyard.agentkit.hooks.hook import Hook, RemovableHandle

__all__ = ["ActionHook", "Hook", "HookedExecutor", "RemovableHandle"]
