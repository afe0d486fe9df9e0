"""Running the async core without an event loop, so the sync agents are derived from it.

Agents are written once, as coroutines. When everything they await completes without
suspending (sync LLM clients, sync hooks, sync sub-agents), a coroutine finishes on its first
`send`, and `run_sync` returns its value. Anything that truly suspends raises
`NotSynchronousError` instead of blocking or needing a loop.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Awaitable, Iterator
from typing import Any, TypeVar

from taskyard.agentkit.agents.errors import NotSynchronousError
from taskyard.plumbing.no_suspend import finish, iterate

__all__ = ["aiter_any", "iter_sync", "resolve", "run_sync", "stream_of"]

T = TypeVar("T")


def run_sync(awaitable: Awaitable[T], owner: str = "a sync agent") -> T:
    """The value of `awaitable`, which must complete without suspending."""
    return finish(awaitable, functools.partial(_not_synchronous, owner))


def iter_sync(stream: AsyncIterator[T], owner: str = "a sync agent") -> Iterator[T]:
    """Iterate an async iterator whose steps complete without suspending."""
    return iterate(stream, functools.partial(_not_synchronous, owner))


def _not_synchronous(owner: str) -> NotSynchronousError:
    return NotSynchronousError(
        f"{owner} awaited something that suspends (an async LLM client, hook or sub-agent?); "
        "use the Async twin (AsyncAgent, AsyncSequential, ...)"
    )


async def resolve(value: T | Awaitable[T]) -> T:
    """Await `value` if it is awaitable: lets one core call sync and async components."""
    if inspect.isawaitable(value):
        return await value
    return value


async def aiter_any(items: Any) -> AsyncIterator[Any]:
    """Iterate a sync or an async iterable."""
    if hasattr(items, "__aiter__"):
        async for item in items:
            yield item
    else:
        for item in items:
            yield item


async def stream_of(result: Any) -> AsyncIterator[tuple[Any, bool]]:
    """What `forward` returned as ``(item, streamed)`` pairs: a generator (sync or async) is a
    stream; a value or an awaitable is one unstreamed item."""
    if inspect.isawaitable(result):
        result = await result
    if inspect.isasyncgen(result) or inspect.isgenerator(result):
        async for item in aiter_any(result):
            yield item, True
    else:
        yield result, False
