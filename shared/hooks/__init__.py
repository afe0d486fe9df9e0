"""Hooks around agent and action calls, and the handle that removes one."""

from shared.hooks.hook import Hook, RemovableHandle

__all__ = ["Hook", "RemovableHandle"]
