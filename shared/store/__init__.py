"""The Redis store every service shares (see `store.py`); Lua scripts under `lua/`."""

from shared.store.store import (
    Created,
    MemoryTail,
    StepCommit,
    StepStart,
    TaskStore,
    ToolResultStored,
)

__all__ = ["Created", "MemoryTail", "StepCommit", "StepStart", "TaskStore", "ToolResultStored"]
