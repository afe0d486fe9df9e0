"""The model's streamed text to the task's event stream, batched: the deltas of one flush
interval go out as one `token` event, so a fast model costs a few Redis writes per step, not
one per token, and a follower still sees text within the interval. What is left when the model ends
goes out with the step's commit (`close` hands it over), not in a write of its own."""

from __future__ import annotations

import asyncio

from taskyard.runtime.events import EventKind
from taskyard.runtime.store import TaskStore

__all__ = ["DeltaBuffer"]


class DeltaBuffer:
    """Collects deltas; publishes them every `interval_s` (0: each at once) and on `close`."""

    def __init__(self, store: TaskStore, task_id: str, sender: str, interval_s: float) -> None:
        self.store = store
        self.task_id = task_id
        self.sender = sender
        self.interval_s = interval_s
        self._pending: list[str] = []
        self._timer: asyncio.TimerHandle | None = None
        self._flushing: asyncio.Task[None] | None = None
        self.ended = False  # the task ended: publish nothing more

    async def add(self, delta: str) -> None:
        self._pending.append(delta)
        if self.interval_s <= 0:
            await self.flush()
        elif self._timer is None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self.interval_s, self._flush_later)

    def _flush_later(self) -> None:
        self._timer = None
        self._flushing = asyncio.get_running_loop().create_task(self.flush())

    async def flush(self) -> None:
        """Publish what is pending now (before the step's commit, so the text comes first)."""
        if self._flushing is not None and self._flushing is not asyncio.current_task():
            await self._flushing
        text, self._pending = "".join(self._pending), []
        if text and not self.ended:
            data = {"delta": text, "sender": self.sender}
            self.ended = await self.store.publish(self.task_id, EventKind.TOKEN, data) is None

    async def close(self) -> str:
        """Stop the timer; the text not published yet (for the commit to publish)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._flushing is not None:
            await self._flushing
        rest, self._pending = "".join(self._pending), []
        return "" if self.ended else rest
