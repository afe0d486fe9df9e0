"""The Redis store every service shares (see `store.py`); Lua scripts under `lua/`."""

from shared.store.store import (
    CallClaim,
    Created,
    MemoryTail,
    NotReplicated,
    StepCommit,
    StepStart,
    TaskStore,
    ToolResultStored,
)

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
