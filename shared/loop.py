"""One asyncio event loop on a thread of its own, so synchronous code (Celery jobs) can run
the async core on it: ``LoopThread().run(coroutine)``.

The same code serves both worker pools. Under Celery's threads pool the caller's thread waits
on a future. Under the gevent pool, gevent has patched `threading`, so the loop "thread" is a
greenlet and the wait is cooperative: a thousand jobs waiting on model calls cost a thousand
small greenlets, not a thousand threads, while one loop carries every call.

The caller's context goes with the coroutine, explicitly: a job's bound log ids and its trace
span (both contextvars, per greenlet under gevent) are there when the step runs on the loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from functools import partial
from typing import Any, TypeVar

__all__ = ["LoopThread"]

T = TypeVar("T")


class LoopThread:
    """An event loop running on its own thread until `close`."""

    def __init__(self, name: str = "taskyard-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run `coro` on the loop and wait for its result (its exception is raised here)."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("LoopThread.run called from its own loop; await instead")
        done: Future[T] = Future()
        context = contextvars.copy_context()  # the caller's: its task is made in it
        self.loop.call_soon_threadsafe(self._start, coro, done, context=context)
        return done.result(timeout)

    def _start(self, coro: Coroutine[Any, Any, T], done: Future[T]) -> None:
        self.loop.create_task(coro).add_done_callback(partial(_settle, done))

    def close(self, timeout: float = 5.0) -> None:
        """Cancel what still runs on the loop, stop it and join its thread."""
        if self.loop.is_closed():
            return
        self.run(_cancel_others(), timeout)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        self.loop.close()


def _settle(done: Future[T], task: asyncio.Task[T]) -> None:
    if task.cancelled():
        done.cancel()
    elif (exc := task.exception()) is not None:
        done.set_exception(exc)
    else:
        done.set_result(task.result())


async def _cancel_others() -> None:
    current = asyncio.current_task()
    pending = [t for t in asyncio.all_tasks() if t is not current]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
