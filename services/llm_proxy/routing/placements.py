"""Where each routing key (session or prompt prefix) was sent, and each replica's live keys.

Affinity routing remembers placements so a session stays put while its replica stays fit, and
counts the keys each replica served within the last `live_s` seconds, so new keys go where few
live ones are: the prefix cache a replica must hold grows with its live sessions, not with
its requests in flight.
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["Placements"]

R = TypeVar("R", bound=Hashable)


class Placements(Generic[R]):
    """An LRU of key -> replica with per-replica counts of live keys."""

    def __init__(
        self,
        live_s: float = 60.0,
        capacity: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._live_s = live_s
        self._capacity = capacity
        self._clock = clock
        self._entries: OrderedDict[Hashable, tuple[R, float]] = OrderedDict()
        self._live: Counter[R] = Counter()

    def get(self, key: Hashable) -> R | None:
        """The replica `key` went to last, if it is still live."""
        self._expire()
        entry = self._entries.get(key)
        return entry[0] if entry is not None else None

    def put(self, key: Hashable, replica: R) -> None:
        """Record that `key` went to `replica` now."""
        old = self._entries.pop(key, None)
        if old is not None:
            self._live[old[0]] -= 1
        self._entries[key] = (replica, self._clock())
        self._live[replica] += 1
        if len(self._entries) > self._capacity:
            self._drop_oldest()

    def live(self, replica: R) -> int:
        """How many keys went to `replica` within the live window."""
        return self._live[replica]

    def _expire(self) -> None:
        horizon = self._clock() - self._live_s
        while self._entries:
            _, (_, seen) = next(iter(self._entries.items()))
            if seen >= horizon:
                return
            self._drop_oldest()

    def _drop_oldest(self) -> None:
        _, (replica, _) = self._entries.popitem(last=False)
        self._live[replica] -= 1
