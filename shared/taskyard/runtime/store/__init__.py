"""The Redis store every service shares: its parts by concern (`store.py` says which), Lua
scripts under `lua/`, a folder per part."""

from taskyard.runtime.store.base import NotReplicated
from taskyard.runtime.store.steps import MemoryTail, StepCommit, StepStart
from taskyard.runtime.store.store import TaskStore
from taskyard.runtime.store.tasks import Created
from taskyard.runtime.store.tool_calls import InterpreterUse, ToolResultStored

__all__ = [
    "Created",
    "InterpreterUse",
    "MemoryTail",
    "NotReplicated",
    "StepCommit",
    "StepStart",
    "TaskStore",
    "ToolResultStored",
]
