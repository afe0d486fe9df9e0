"""A warm pool: kernels started ahead of time, so a new session skips the start-up wait.

It keeps as many started kernels as `Demand` asks for (the busiest second of new sessions in
the last minute, within the configured bounds), started by up to `starters` threads at once:
a burst is refilled in parallel, not one kernel after another. When demand falls, the kernels
over the target are stopped, oldest first.

A session that finds the pool empty while the pool is about to make a kernel no other
session waits for (one under way, or one the target still asks for) takes that one when it is
ready, rather than start one more: twenty sessions each starting a container at once on a
small machine make every one of them slow (the engine is the bottleneck: see `make bench`),
while the pool's few starters keep it busy without crowding it. Past what the pool is about to
make, a session starts its own (a cold start), so a small pool never queues a burst.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from taskyard.sandbox.channel import KernelChannel, StartKernel
from taskyard.sandbox.demand import Demand, PoolBounds

__all__ = ["PoolState", "WarmPool"]

log = logging.getLogger(__name__)

_RECHECK_S = 1.0  # starters look at the target this often: it falls as time passes
_FAILURE_PAUSE_S = 2.0  # after a kernel failed to start: a broken engine is not hammered
_HANDOFF_WAIT_S = 30.0  # the longest a session waits on the pool before starting its own


@dataclass(frozen=True)
class PoolState:
    ready: int
    starting: int
    target: int


class WarmPool:
    """Started kernels waiting for sessions, sized to demand within `bounds`."""

    def __init__(
        self, start: StartKernel, bounds: PoolBounds, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._start = start
        self._demand = Demand(bounds, clock)
        self._ready: deque[KernelChannel] = deque()
        self._starting = 0
        self._waiting = 0  # sessions waiting for a kernel the pool is about to make, one each
        self._failing = False  # the last start failed: nobody waits on the pool then
        self._changed = threading.Condition()
        self._closed = False
        starters = bounds.starters if bounds.enabled else 0
        self._starters = [
            threading.Thread(target=self._keep_filled, name=f"sandbox-pool-{n}", daemon=True)
            for n in range(starters)
        ]
        for thread in self._starters:
            thread.start()

    def __len__(self) -> int:
        return len(self._ready)

    def take(self, session_key: str) -> KernelChannel:
        """A started kernel: a warm one, else one the pool is about to make, else one started
        now for the session."""
        with self._changed:
            self._demand.record()
            self._changed.notify_all()  # the target may have grown
        while (channel := self._pop()) is not None:
            if channel.alive():
                return channel
            channel.close()
        return self._start(session_key)

    def state(self) -> PoolState:
        with self._changed:
            return PoolState(len(self._ready), self._starting, self._demand.target())

    def close(self) -> None:
        """Stop refilling and stop every warm kernel."""
        with self._changed:
            self._closed = True
            ready, self._ready = list(self._ready), deque()
            self._changed.notify_all()
        for thread in self._starters:
            thread.join()
        for channel in ready:
            channel.close()

    def _pop(self) -> KernelChannel | None:
        """A ready kernel; else, if the pool is about to make one no other session waits for,
        that one when it is ready; else None (the session starts its own)."""
        with self._changed:
            if self._ready:
                return self._ready.popleft()
            if not self._start_left():
                return None
            self._waiting += 1
            try:
                return self._await_handoff(time.monotonic() + _HANDOFF_WAIT_S)
            finally:
                self._waiting -= 1

    def _coming(self) -> int:
        """Kernels the pool is about to make: those under way, or what its target still asks
        for (called locked)."""
        if self._failing or self._closed:
            return 0
        return max(self._starting, self._demand.target() - len(self._ready))

    def _start_left(self) -> bool:
        """Whether a kernel the pool is about to make has no session waiting for it yet."""
        return self._waiting < self._coming()

    def _await_handoff(self, deadline: float) -> KernelChannel | None:
        """Wait (locked, counted in `_waiting`) while what the pool makes covers the waiters."""
        while not self._ready and self._waiting <= self._coming():
            if not self._changed.wait(deadline - time.monotonic()):
                break
        return self._ready.popleft() if self._ready else None

    def _keep_filled(self) -> None:
        """One starter: start a kernel while the pool is short, stop one while it is over."""
        while (work := self._next_work()) is not None:
            if work is not True:
                work.close()  # over the target
                continue
            channel = self._start_one()
            self._keep(channel)
            if channel is None:
                time.sleep(_FAILURE_PAUSE_S)  # a broken engine is not hammered

    def _next_work(self) -> KernelChannel | Literal[True] | None:
        """A kernel to stop, True to start one, or None once closed; waits for either."""
        with self._changed:
            while not self._closed:
                target = self._demand.target()
                if len(self._ready) > target:
                    return self._ready.popleft()
                if len(self._ready) + self._starting < target:
                    self._starting += 1
                    return True
                self._changed.wait(_RECHECK_S)
            return None

    def _start_one(self) -> KernelChannel | None:
        try:
            return self._start(None)
        except Exception:
            # A failing engine must not kill the pool; sessions then start their own.
            log.exception("warm pool: could not start a kernel")
            return None

    def _keep(self, channel: KernelChannel | None) -> None:
        """Add a started kernel to the pool (None: the start failed), waking who waits."""
        with self._changed:
            self._starting -= 1
            self._failing = channel is None
            self._changed.notify_all()
            if channel is not None and not self._closed:
                self._ready.append(channel)
                return
        if channel is not None:
            channel.close()
