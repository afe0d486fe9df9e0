"""Each pool thread's own client of the store, on the thread's own event loop (the toolbox's,
where its cells run): a tool call's claim and its result go to Redis from the thread that took
the call's job. Through the worker's store loop thread instead, each was a hop there and back,
four thread wake-ups a call besides Redis's replies."""

from __future__ import annotations

import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from services.tool_worker.toolbox import Toolbox
from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.runtime.store import TaskStore
from taskyard.runtime.store.sandboxes import SandboxDirectory

__all__ = ["ThreadStore", "ThreadStores"]

T = TypeVar("T")


@dataclass(frozen=True)
class ThreadStore:
    """One thread's store client, and the sandbox directory over it."""

    store: TaskStore
    directory: SandboxDirectory


class ThreadStores:
    """Runs coroutines on the calling thread's own loop with that thread's store client, made
    on its first use there (a client's connections belong to the loop that opened them)."""

    def __init__(self, settings: ToolWorkerSettings, tools: Toolbox, record_ttl_s: float) -> None:
        self.settings = settings
        self.tools = tools  # whose `run_here` is each thread's loop
        self.record_ttl_s = record_ttl_s
        self._local = threading.local()

    def run(self, make: Callable[[ThreadStore], Coroutine[Any, Any, T]]) -> T:
        """What `make(this thread's store)` returns, run on this thread's loop."""
        here: ThreadStore | None = getattr(self._local, "here", None)
        if here is None:
            store = TaskStore.from_settings(self.settings, "taskyard-tool-worker-calls")
            here = self._local.here = ThreadStore(store, SandboxDirectory(store, self.record_ttl_s))
        return self.tools.run_here(make(here))
