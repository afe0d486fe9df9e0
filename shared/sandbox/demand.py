"""How many kernels the warm pool keeps started: a pure decision over recent session starts.

The target is the most sessions that took a kernel within any one second of the last
`window_s` seconds, kept within [minimum, maximum]. A burst of twenty new sessions in a second
makes the pool hold twenty until a minute passes without such a burst; then it shrinks back.
Why the busiest second and not the average: bursts are what empty a pool, and a pool sized to
the average of a bursty minute is empty again at the next burst.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from shared.settings import Settings

__all__ = ["Demand", "PoolBounds", "pool_bounds"]


@dataclass(frozen=True)
class PoolBounds:
    """The warm pool's configuration. `maximum` 0 turns the pool off."""

    minimum: int = 1
    maximum: int = 24
    starters: int = 4  # kernels started at once
    window_s: float = 60.0

    @classmethod
    def from_settings(cls, settings: Settings) -> PoolBounds:
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
    """Takes per second over a sliding window, and the pool size they call for."""

    def __init__(self, bounds: PoolBounds, clock: Callable[[], float] = time.monotonic) -> None:
        self._bounds = bounds
        self._clock = clock
        self._seconds: deque[list[int]] = deque()  # [second, takes in it], oldest first

    def record(self) -> None:
        """One session took a kernel now."""
        second = math.floor(self._clock())
        if self._seconds and self._seconds[-1][0] == second:
            self._seconds[-1][1] += 1
        else:
            self._seconds.append([second, 1])

    def target(self) -> int:
        """Kernels to keep started now."""
        oldest = math.floor(self._clock() - self._bounds.window_s)
        while self._seconds and self._seconds[0][0] < oldest:
            self._seconds.popleft()
        busiest = max((takes for _, takes in self._seconds), default=0)
        return min(max(busiest, self._bounds.minimum), self._bounds.maximum)


def pool_bounds(settings: Settings, size: int | None = None) -> PoolBounds:
    """The settings' pool, or a pool of exactly `size` kernels when one is given."""
    return PoolBounds.from_settings(settings) if size is None else PoolBounds.fixed(size)
