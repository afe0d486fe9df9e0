"""Sessions forked ahead of demand: a fork server's spares, so that opening a session is
taking one that is ready, and the fork happens in the background.

How many: the opens of the last `window_s` seconds, within [minimum, maximum]. A burst makes
the count grow to what it took; a quiet spell brings it back to the minimum. A spare never ran
a cell: it is any session's, and the container is one tenant's anyway.
"""

from __future__ import annotations

import itertools
import time
from collections import deque

__all__ = ["Spares"]


class Spares:
    """The fork server's spare sessions (their keys on the supervisor) and their target."""

    def __init__(self, minimum: int, maximum: int, window_s: float = 2.0) -> None:
        self.minimum = minimum
        self.maximum = max(minimum, maximum)
        self._window_s = window_s
        self._opens: deque[float] = deque(maxlen=self.maximum)
        self._ready: deque[str] = deque()
        self._pending: set[str] = set()
        self._keys = (f"~spare-{n}" for n in itertools.count(1))

    def owns(self, key: object) -> bool:
        return key in self._pending or key in self._ready

    def take(self) -> str | None:
        """A ready spare's key for a session being opened (recorded as an open), or None."""
        self._opens.append(time.monotonic())
        return self._ready.popleft() if self._ready else None

    def wanted(self) -> int:
        """How many more spares to fork now."""
        oldest = time.monotonic() - self._window_s
        while self._opens and self._opens[0] < oldest:
            self._opens.popleft()
        target = min(max(len(self._opens), self.minimum), self.maximum)
        return max(0, target - len(self._ready) - len(self._pending))

    def forking(self) -> str:
        """The key of a spare about to be forked."""
        key = next(self._keys)
        self._pending.add(key)
        return key

    def ready(self, key: str) -> None:
        self._pending.discard(key)
        self._ready.append(key)

    def lost(self, key: str) -> None:
        """A spare that failed or ended before anyone took it."""
        self._pending.discard(key)
        if key in self._ready:
            self._ready.remove(key)
