"""The Redis store every service shares: its parts by concern (`store.py` says which), Lua
scripts under `lua/`, a folder per part."""

from shared.runtime.store.base import NotReplicated
from shared.runtime.store.steps import MemoryTail, StepCommit, StepStart
from shared.runtime.store.store import TaskStore
from shared.runtime.store.tasks import Created
from shared.runtime.store.tool_calls import CallClaim, ToolResultStored

__all__ = [
    "CallClaim",
    "Created",
    "MemoryTail",
    "NotReplicated",
    "StepCommit",
    "StepStart",
    "TaskStore",
    "ToolResultStored",
]
