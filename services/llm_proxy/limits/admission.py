"""Backpressure: requests wait in a bounded queue while every replica is at its bound.

A full queue answers 429 at once (the client should slow down); a request that waited past the
timeout gets 503. Both carry Retry-After.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

from services.llm_proxy.errors import Overloaded

__all__ = ["WaitQueue"]


class WaitQueue:
    """FIFO waiters for a free slot in one model group."""

    def __init__(self, size: int, timeout_s: float) -> None:
        self._size = size
        self._timeout = timeout_s
        self._waiters: deque[asyncio.Future[None]] = deque()

    def __len__(self) -> int:
        return len(self._waiters)

    async def wait(self, deadline: float) -> None:
        """Wait until a slot may be free, or raise `Overloaded` (queue full, or `deadline`)."""
        if len(self._waiters) >= self._size:
            raise Overloaded(
                "every replica is busy and the queue is full", status=429, retry_after=1
            )
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout_at(deadline):
                await waiter
        except TimeoutError:
            raise Overloaded(
                "every replica stayed busy while the request waited",
                status=503,
                retry_after=self._timeout,
            ) from None
        finally:
            with contextlib.suppress(ValueError):
                self._waiters.remove(waiter)  # still queued only if it timed out

    def deadline(self) -> float:
        """When a request that starts waiting now must give up."""
        return asyncio.get_running_loop().time() + self._timeout

    def notify(self) -> None:
        """A slot was freed: wake the oldest waiter."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
