"""Cancellation reaching running work: the gateway announces a cancelled task on a Redis
channel, and every worker process stops what it runs for that task at once.

`cancel` ends a task and announces it; `CancelWatch` is the receiving side: one
subscription per process, fanning out to the work registered with `watch`. A forgotten
session is announced the same way, so the tool worker stops its interpreter. Work that may
not have started what a cancel stops (a tool call between its claim and its cell) registers
with `watch_until_stopped`, which tries again until it has.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import redis.asyncio as aioredis
from celery import Celery

from taskyard.plumbing import keys
from taskyard.runtime.store import TaskStore
from taskyard.runtime.task import TaskRecord, TaskStatus

__all__ = [
    "CancelWatch", "Heard", "announce", "announce_forgotten", "cancel", "cancel_children", "stop",
]  # fmt: skip

log = logging.getLogger("taskyard.cancel")

OnCancel = Callable[[], object]  # what it returns is not used
_AGAIN_S = 0.02  # how often `watch_until_stopped` tries again
_TRY_FOR_S = 2.0  # and for how long: its work starts what a cancel stops within that


@dataclass
class Heard:
    """Whether a cancel of the watched task was heard."""

    cancelled: bool = False


async def announce(client: aioredis.Redis, task_id: str) -> None:
    """Tell every worker that `task_id` was cancelled."""
    await client.publish(keys.CANCEL_CHANNEL, task_id)


async def announce_forgotten(client: aioredis.Redis, session_key: str) -> None:
    """Tell every worker that the session ("tenant:session_id") was forgotten."""
    await client.publish(keys.FORGOTTEN_CHANNEL, session_key)


async def cancel(store: TaskStore, celery: Celery, record: TaskRecord, reason: str) -> bool:
    """End a live task as cancelled, stop what runs for it, pass its session on (the end
    pushes the next task's first step). False if it had ended already."""
    ended, _ = await store.end(record, TaskStatus.CANCELLED, error=reason)
    if ended:
        await stop(store, celery, record.id)
    return ended


async def stop(store: TaskStore, celery: Celery, task_id: str) -> None:
    """Stop what still runs for a task that has just ended cancelled: the step or tool call
    in flight (announced), the child tasks it started."""
    await announce(store.r, task_id)
    await cancel_children(store, celery, task_id)


async def cancel_children(store: TaskStore, celery: Celery, task_id: str) -> None:
    """Cancel the live child tasks `task_id` started (and theirs)."""
    children = await store.get_many(await store.children(task_id))
    for child in children:
        if child is not None and not child.terminal:
            await cancel(store, celery, child, "cancelled: the task that asked for it ended")


class CancelWatch:
    """Listens for cancelled task ids and calls what was registered for them.

    Run `listen()` as a task on the process's loop; wrap work in ``with watch.watch(id, fn)``.
    A message lost while the subscription reconnects only means the work runs to its end:
    the store refuses its results for an ended task anyway.
    """

    def __init__(
        self, client: aioredis.Redis, on_forgotten: Callable[[str], None] | None = None
    ) -> None:
        self.client = client
        self.on_forgotten = on_forgotten  # called with a forgotten session's key
        self._watchers: dict[str, list[OnCancel]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None  # the one `listen` runs on
        self.ready = asyncio.Event()

    @contextmanager
    def watch(self, task_id: str, on_cancel: OnCancel) -> Iterator[None]:
        """Call `on_cancel` if `task_id` is cancelled while the block runs."""
        self._watchers.setdefault(task_id, []).append(on_cancel)
        try:
            yield
        finally:
            callbacks = self._watchers.get(task_id, [])
            callbacks.remove(on_cancel)
            if not callbacks:
                self._watchers.pop(task_id, None)

    @contextmanager
    def watch_until_stopped(
        self, task_id: str, stop: Callable[[], bool], within_s: float = _TRY_FOR_S
    ) -> Iterator[Heard]:
        """Like `watch`, for work that may not have started yet what `stop` stops: on a cancel,
        `stop` is called, then again every few milliseconds until it says it stopped
        something, the block ends, or `within_s` passed. The block reads whether a cancel was
        heard (it then starts nothing more)."""
        heard, running = Heard(), [True]

        def attempt(deadline: float) -> None:
            loop = self._loop
            if running[0] and not stop() and time.monotonic() < deadline and loop is not None:
                # From any thread (`cancelled` may be called from one): the loop's own timer.
                loop.call_soon_threadsafe(loop.call_later, _AGAIN_S, attempt, deadline)

        def on_cancel() -> None:
            heard.cancelled = True
            attempt(time.monotonic() + within_s)

        with self.watch(task_id, on_cancel):
            try:
                yield heard
            finally:
                running[0] = False

    def cancelled(self, task_id: str) -> None:
        """Run what was registered for `task_id` (also the entry point for tests)."""
        for on_cancel in list(self._watchers.get(task_id, ())):
            on_cancel()

    async def listen(self) -> None:
        """Receive announcements until cancelled, resubscribing after connection errors."""
        self._loop = asyncio.get_running_loop()
        while True:
            try:
                await self._subscribed()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis restarting: wait, then subscribe again
                self.ready.clear()
                log.warning("cancel channel lost, resubscribing: %s", exc)
                await asyncio.sleep(1.0)

    async def _subscribed(self) -> None:
        async with self.client.pubsub(ignore_subscribe_messages=True) as pubsub:
            await pubsub.subscribe(keys.CANCEL_CHANNEL, keys.FORGOTTEN_CHANNEL)
            self.ready.set()
            async for message in pubsub.listen():
                if message["channel"] == keys.FORGOTTEN_CHANNEL:
                    if self.on_forgotten is not None:
                        self.on_forgotten(str(message["data"]))
                else:
                    self.cancelled(str(message["data"]))
