"""How many kernels the warm pool keeps started: a pure decision over recent session starts.

The target is the most sessions that took a kernel within any one-second span of the last
`window_s` seconds (a sliding span: a burst across a second's boundary counts whole), kept
within [minimum, maximum]. A burst of twenty new sessions in a second
makes the pool hold twenty until a minute passes without such a burst; then it shrinks back.
Why the busiest second and not the average: bursts are what empty a pool, and a pool sized to
the average of a bursty minute is empty again at the next burst.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from taskyard.plumbing.settings import SandboxSettings

__all__ = ["Demand", "PoolBounds", "pool_bounds"]


@dataclass(frozen=True)
class PoolBounds:
    """The warm pool's configuration. `maximum` 0 turns the pool off."""

    minimum: int = 1
    maximum: int = 24
    starters: int = 4  # kernels started at once
    window_s: float = 60.0

    @classmethod
    def from_settings(cls, settings: SandboxSettings) -> PoolBounds:
        """`sandbox_warm_pool` kernels at least (0: no pool), up to `sandbox_warm_pool_max`."""
        minimum = settings.sandbox_warm_pool
        maximum = max(minimum, settings.sandbox_warm_pool_max) if minimum else 0
        return cls(minimum, maximum, settings.sandbox_warm_starts, settings.sandbox_warm_window_s)

    @classmethod
    def fixed(cls, size: int) -> PoolBounds:
        """A pool of exactly `size` kernels whatever the demand (0: no pool)."""
        return cls(minimum=size, maximum=size)

    @property
    def enabled(self) -> bool:
        return self.maximum > 0


class Demand:
    """Session starts over a sliding window, and the pool size they call for."""

    def __init__(self, bounds: PoolBounds, clock: Callable[[], float] = time.monotonic) -> None:
        self._bounds = bounds
        self._clock = clock
        # When sessions took kernels, oldest first. Past `maximum` in one second the target
        # is the maximum anyway, so a bounded memory of them loses nothing that counts.
        self._takes: deque[float] = deque(maxlen=max(1000, 100 * bounds.maximum))

    def record(self) -> None:
        """One session took a kernel now."""
        self._takes.append(self._clock())

    def target(self) -> int:
        """Kernels to keep started now."""
        oldest = self._clock() - self._bounds.window_s
        while self._takes and self._takes[0] < oldest:
            self._takes.popleft()
        return min(max(self._busiest_second(), self._bounds.minimum), self._bounds.maximum)

    def _busiest_second(self) -> int:
        """The most takes within one second of each other (two pointers over the times)."""
        busiest, first = 0, 0
        for last, at in enumerate(self._takes):
            while at - self._takes[first] >= 1.0:
                first += 1
            busiest = max(busiest, last - first + 1)
        return busiest


def pool_bounds(settings: SandboxSettings, size: int | None = None) -> PoolBounds:
    """The settings' pool, or a pool of exactly `size` kernels when one is given."""
    return PoolBounds.from_settings(settings) if size is None else PoolBounds.fixed(size)
