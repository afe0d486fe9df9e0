"""The Redis store every service shares: its parts by concern (`store.py` says which), Lua
scripts under `lua/`, a folder per part."""

from shared.store.base import NotReplicated
from shared.store.steps import MemoryTail, StepCommit, StepStart
from shared.store.store import TaskStore
from shared.store.tasks import Created
from shared.store.tool_calls import CallClaim, ToolResultStored

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
