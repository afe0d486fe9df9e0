"""Holds model calls until a batch of them waits together, as a test's proof of concurrency.

With ``hold_until: N`` (``POST /scripted/config``), every model call waits before its first
byte until N calls wait at once, then all of them are answered. A client that keeps N calls in
flight at once fills the batch; one that cannot never does, and its calls are let go after
`HOLD_TIMEOUT_S` with the peak (``/scripted/stats``'s ``peak_held``) short of N. Nothing here
depends on timing: the batch fills, or it does not.
"""

from __future__ import annotations

import asyncio

__all__ = ["HOLD_TIMEOUT_S", "HoldGate"]

HOLD_TIMEOUT_S = 120.0


class HoldGate:
    """The calls waiting for their batch, and the most that ever waited together."""

    def __init__(self) -> None:
        self._held: list[asyncio.Future[None]] = []
        self.peak = 0

    @property
    def held(self) -> int:
        return len(self._held)

    async def join(self, batch: int, timeout_s: float = HOLD_TIMEOUT_S) -> None:
        """Wait until `batch` calls wait here together (this one included), or `timeout_s`."""
        waiting: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._held.append(waiting)
        self.peak = max(self.peak, len(self._held))
        if len(self._held) >= batch:
            self.release()
        try:
            await asyncio.wait_for(asyncio.shield(waiting), timeout_s)
        except TimeoutError:
            self._held.remove(waiting)

    def release(self) -> None:
        """Let every held call go (the batch is full, or holding was switched off)."""
        held, self._held = self._held, []
        for waiting in held:
            if not waiting.done():
                waiting.set_result(None)
