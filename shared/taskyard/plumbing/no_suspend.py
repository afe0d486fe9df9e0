"""Running a coroutine that never suspends without an event loop: it finishes on its first
step, and its value comes out of that step's `StopIteration`. Code written once as coroutines
gets its blocking twin this way: the sync agents (`taskyard.agentkit.agents.drive`) and the
blocking client (`taskyard.client.blocking`). A coroutine that does suspend is closed and the
caller's own error raised, never a loop started or a thread blocked."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TypeVar

__all__ = ["finish", "iterate"]

T = TypeVar("T")


def finish(awaitable: Awaitable[T], suspended: Callable[[], Exception]) -> T:
    """The value of `awaitable`; `suspended()` is raised if it waits on anything."""
    steps = awaitable.__await__()
    try:
        steps.send(None)
    except StopIteration as done:
        value: T = done.value  # what `awaitable` returns
        return value
    steps.close()
    raise suspended()


def iterate(stream: AsyncIterator[T], suspended: Callable[[], Exception]) -> Iterator[T]:
    """`stream` as a plain iterator, each step finished as `finish` does; stopping early
    closes the stream (and whatever it holds open)."""
    try:
        while True:
            try:
                item = finish(anext(stream), suspended)
            except StopAsyncIteration:
                return
            yield item
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            finish(close(), suspended)
