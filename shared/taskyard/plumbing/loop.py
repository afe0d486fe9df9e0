"""One asyncio event loop on a thread of its own, so synchronous code (Celery jobs) can run
the async core on it: ``LoopThread().run(coroutine)``.

The loop is uvloop's and its thread is a native one, also under Celery's gevent pool: there
gevent has patched `threading` and `socket`, and an asyncio loop run as a greenlet pays for
gevent's socket wrappers and hub on every read and write (measured: about 2.3x the CPU per
Redis command of uvloop on a native thread, whose sockets libuv drives in C). The two sides
then meet across threads: under gevent a job's greenlet waits on a gevent `AsyncResult`, which
the loop thread settles through the hub's thread-safe callback queue, so a thousand waiting
jobs cost a thousand small greenlets, not a thousand threads; elsewhere (the threads pool,
tests) the caller waits on a `concurrent.futures.Future`.

The caller's context goes with the coroutine, explicitly: a job's bound log ids and its trace
span (both contextvars, per greenlet under gevent) are there when the step runs on the loop.
"""

from __future__ import annotations

import _thread
import asyncio
import contextvars
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar

import uvloop

__all__ = ["LoopThread", "cancel_others"]

T = TypeVar("T")


class _Waiter(Protocol[T]):
    """Where a caller waits for a coroutine's outcome, settled from the loop's thread."""

    def settle(self, task: asyncio.Task[T]) -> None: ...
    def wait(self, timeout: float | None) -> T: ...


class LoopThread:
    """A uvloop event loop running on its own native thread until `close`."""

    def __init__(self, name: str = "taskyard-loop") -> None:
        self.name = name
        self.loop = uvloop.new_event_loop()
        self._ident: int | None = None
        # Looked up once: gevent's lookup of the original costs ~5 us, on every `run`.
        self._get_ident: Callable[[], int] = _native("get_ident")
        self._stopped = _native("allocate_lock")()
        self._stopped.acquire()
        _native("start_new_thread")(self._serve, ())

    def _serve(self) -> None:
        self._ident = self._get_ident()
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            self._stopped.release()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run `coro` on the loop and wait for its result (its exception is raised here)."""
        if self._get_ident() == self._ident:
            coro.close()
            raise RuntimeError("LoopThread.run called from its own loop; await instead")
        waiter: _Waiter[T] = _GreenletWaiter() if _under_gevent() else _ThreadWaiter()
        context = contextvars.copy_context()  # the caller's: its task is made in it
        self.loop.call_soon_threadsafe(self._start, coro, waiter, context=context)
        return waiter.wait(timeout)

    def _start(self, coro: Coroutine[Any, Any, T], waiter: _Waiter[T]) -> None:
        self.loop.create_task(coro).add_done_callback(waiter.settle)

    def close(self, timeout: float = 5.0) -> None:
        """Cancel what still runs on the loop, stop it and wait for its thread."""
        if self.loop.is_closed():
            return
        self.run(cancel_others(), timeout)
        self.loop.call_soon_threadsafe(self.loop.stop)
        if self._stopped.acquire(True, timeout):
            self.loop.close()


class _ThreadWaiter:
    def __init__(self) -> None:
        self.future: Future[Any] = Future()

    def settle(self, task: asyncio.Task[Any]) -> None:
        _settle(self.future.set_result, self.future.set_exception, self.future.cancel, task)

    def wait(self, timeout: float | None) -> Any:
        return self.future.result(timeout)


class _GreenletWaiter:
    """A greenlet's wait; the loop thread hands the outcome to the greenlet's hub."""

    def __init__(self) -> None:
        from gevent import get_hub
        from gevent.event import AsyncResult

        self.hub = get_hub()
        self.result: AsyncResult[Any] = AsyncResult()

    def settle(self, task: asyncio.Task[Any]) -> None:
        post = self.hub.loop.run_callback_threadsafe
        result = self.result
        _settle(
            lambda value: post(result.set, value),
            lambda exc: post(result.set_exception, exc),
            lambda: post(result.set_exception, asyncio.CancelledError()),
            task,
        )

    def wait(self, timeout: float | None) -> Any:
        # An active watcher while waiting: a hub with nothing else to watch (no sockets, no
        # timers: outside a Celery worker) would otherwise end the wait with LoopExit before
        # the loop thread's callback arrives.
        awake = self.hub.loop.async_()
        awake.start(_nothing)
        try:
            return self.result.get(timeout=timeout)
        finally:
            awake.stop()
            awake.close()


def _nothing() -> None:
    pass


def _settle(
    done: Callable[[Any], Any],
    failed: Callable[[BaseException], Any],
    cancelled: Callable[[], Any],
    task: asyncio.Task[Any],
) -> None:
    if task.cancelled():
        cancelled()
    elif (exc := task.exception()) is not None:
        failed(exc)
    else:
        done(task.result())


def _under_gevent() -> bool:
    """Whether gevent has patched this process (Celery's gevent pool does, before any job)."""
    try:
        from gevent import monkey
    except ImportError:
        return False
    return bool(monkey.is_module_patched("threading"))


def _native(name: str) -> Any:
    """`_thread.<name>` as the interpreter made it, even where gevent has patched it."""
    if _under_gevent():
        from gevent import monkey

        return monkey.get_original("_thread", name)
    return getattr(_thread, name)


async def cancel_others() -> None:
    """Cancel every other task of the running loop and wait for them to end."""
    current = asyncio.current_task()
    pending = [t for t in asyncio.all_tasks() if t is not current]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
