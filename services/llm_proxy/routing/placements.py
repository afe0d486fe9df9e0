"""Where each routing key (session or prompt prefix) was sent, and each replica's live keys.

Affinity routing remembers placements so a session stays put while its replica stays fit, and
counts the keys each replica served within the last `live_s` seconds, so new keys go where few
live ones are: the prefix cache a replica must hold grows with its live sessions, not with
its requests in flight.

Times are wall-clock seconds: placements travel between proxy instances (`fleet.py`), and a
placement's time must mean the same on every host.
"""

from __future__ import annotations

import math
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["Placement", "Placements"]

R = TypeVar("R", bound=Hashable)


@dataclass(slots=True)
class Placement(Generic[R]):
    """Where one key went: the replica, when a proxy first sent the key there, when it was
    last sent there, and which proxy instance placed it."""

    replica: R
    placed_at: float
    seen: float
    origin: str = ""
    shared: float = -math.inf  # when this instance last handed it to the sync (own keys)

    def newer_than(self, other: Placement[R]) -> bool:
        """Whether this placement wins over `other` (the later one; ties by instance)."""
        return (self.placed_at, self.origin) > (other.placed_at, other.origin)


class Placements(Generic[R]):
    """An LRU of key -> placement with per-replica counts of live keys."""

    def __init__(
        self,
        live_s: float = 60.0,
        capacity: int = 100_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._live_s = live_s
        self._capacity = capacity
        self._clock = clock
        self._entries: OrderedDict[Hashable, Placement[R]] = OrderedDict()
        self._live: Counter[R] = Counter()

    def entry(self, key: Hashable) -> Placement[R] | None:
        """`key`'s placement, if it is still live."""
        horizon = self._expire()
        placement = self._entries.get(key)
        # An entry learnt late (another instance's, with its own time) may sit behind newer ones.
        return placement if placement is not None and placement.seen >= horizon else None

    def get(self, key: Hashable) -> R | None:
        """The replica `key` went to last, if it is still live."""
        placement = self.entry(key)
        return placement.replica if placement is not None else None

    def put(
        self,
        key: Hashable,
        replica: R,
        placed_at: float | None = None,
        seen: float | None = None,
        origin: str = "",
    ) -> Placement[R]:
        """Record that `key` went to `replica` at `seen` (now); a key that stays on its replica
        keeps its placement time unless `placed_at` is given."""
        now = self._clock() if seen is None else seen
        old = self._entries.pop(key, None)
        if old is not None and old.replica == replica and placed_at is None:
            old.seen = max(old.seen, now)
            self._entries[key] = old
            return old
        if old is not None:
            self._live[old.replica] -= 1
        placement = Placement(replica, now if placed_at is None else placed_at, now, origin)
        self._entries[key] = placement
        self._live[replica] += 1
        if len(self._entries) > self._capacity:
            self._drop_oldest()
        return placement

    def drop(self, key: Hashable) -> None:
        """Forget `key`."""
        placement = self._entries.pop(key, None)
        if placement is not None:
            self._live[placement.replica] -= 1

    def live(self, replica: R) -> int:
        """How many keys went to `replica` within the live window."""
        return self._live[replica]

    def _expire(self) -> float:
        horizon = self._clock() - self._live_s
        entries = self._entries
        while entries:
            if next(iter(entries.values())).seen >= horizon:
                break
            self._drop_oldest()
        return horizon

    def _drop_oldest(self) -> None:
        _, placement = self._entries.popitem(last=False)
        self._live[placement.replica] -= 1
