"""Running a coroutine that never suspends without an event loop: it finishes on its first
step, and its value comes out of that step's `StopIteration`. Code written once as coroutines
gets its blocking twin this way: the sync agents (`taskyard.agentkit.agents.drive`), the
blocking client (`taskyard.client.blocking`) and the blocking model client
(`taskyard.agentkit.llms.openai_chat`, through `blocking_method` and `iterating_method`). A
coroutine that does suspend is closed and the caller's own error raised, never a loop started
or a thread blocked."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Concatenate, ParamSpec, TypeVar

__all__ = ["blocking_method", "finish", "iterate", "iterating_method"]

T = TypeVar("T")
P = ParamSpec("P")
Core = TypeVar("Core")
Twin = TypeVar("Twin")


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


def blocking_method(
    method: Callable[Concatenate[Core, P], Awaitable[T]],
    core_of: Callable[[Twin], Core],
    suspended: Callable[[], Exception],
) -> Callable[Concatenate[Twin, P], T]:
    """The core's coroutine method as a method of its blocking twin, run on `core_of(twin)`
    (its signature and docstring kept)."""

    @functools.wraps(method)
    def call(self: Twin, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return finish(method(core_of(self), *args, **kwargs), suspended)

    return call


def iterating_method(
    method: Callable[Concatenate[Core, P], AsyncIterator[T]],
    core_of: Callable[[Twin], Core],
    suspended: Callable[[], Exception],
) -> Callable[Concatenate[Twin, P], Iterator[T]]:
    """The core's stream method as a method of its blocking twin returning a plain iterator."""

    @functools.wraps(method)
    def call(self: Twin, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        return iterate(method(core_of(self), *args, **kwargs), suspended)

    return call
