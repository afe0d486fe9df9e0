"""What this proxy instance knows of the whole fleet: every instance's placements and load.

Each instance routes from memory alone; a background sync (`redis_sync.py`) hands this view
what the other instances published (their placements, their per-replica load) and takes what
this one placed. The policy reads the merged view:

- A key's replica is the latest placement any instance made of it while it is live: the one
  placed last wins (ties by instance name). A key re-placed because its home failed moves on
  every instance, and two instances that placed a new key at once settle on one replica at
  the next sync. Each key is held once, as this instance's own (it placed or followed it:
  those it publishes) or as another's.
- A replica's requests in flight are this instance's own, plus what each other instance
  published last: the mean over its last sync interval (at low load a sample would often
  show a request that ended a moment later, and push a session off its idle home). A peer
  silent for `peer_ttl_s` (stopped, or Redis unreachable) stops counting, and the view falls
  back to this instance's own state.
- A replica's live keys, which new keys are balanced over, are the keys this view holds on
  it, each counted once whoever placed it. (Adding up counts each instance published would
  count a session once while it is new and once per instance later: new sessions would pile
  onto the replicas holding the newest, busiest ones, and their prefix caches overflow;
  docs/benchmarks.md has the measurement.)

Nothing here touches the network or waits: every method is a few dictionary operations.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from services.llm_proxy.routing.placements import Placement, Placements

__all__ = ["FleetView", "PeerLoad", "RouteKey"]

R = TypeVar("R", bound=Hashable)

RouteKey = tuple[str, int]  # (model group, key hash)


@dataclass(frozen=True, slots=True)
class PeerLoad(Generic[R]):
    """What another instance published of its load: when, and per replica its requests in
    flight (their mean over its last sync interval)."""

    at: float
    in_flight: Mapping[R, float]


class FleetView(Generic[R]):
    """This instance's placements merged with the other instances' placements and load."""

    def __init__(
        self,
        live_s: float = 60.0,
        peer_ttl_s: float = 5.0,
        capacity: int = 100_000,
        clock: Callable[[], float] = time.time,
        instance: str | None = None,
        publish: bool = True,
    ) -> None:
        self.instance = instance or uuid.uuid4().hex[:12]
        self._publish = publish  # False: no sync takes the news, so none is kept
        self._own: Placements[R] = Placements(live_s, capacity, clock)
        self._theirs: Placements[R] = Placements(live_s, capacity, clock)
        self._live_s = live_s
        self._peer_ttl_s = peer_ttl_s
        # A key this instance keeps using is published again this often, so that the others
        # keep it live as long as it is used anywhere.
        self._refresh_s = live_s / 4
        self._clock = clock
        self._news: dict[RouteKey, Placement[R]] = {}
        self._peers: dict[str, PeerLoad[R]] = {}
        self._in_flight_elsewhere: dict[R, float] = {}

    # --- the policy's side: read and record, on the request path --------------------------

    def get(self, key: RouteKey) -> R | None:
        """The replica of `key`'s latest live placement by any instance, if there is one."""
        placement = self._own.entry(key) or self._theirs.entry(key)
        return placement.replica if placement is not None else None

    def put(self, key: RouteKey, replica: R) -> None:
        """Record that this instance sent `key` to `replica` now."""
        now = self._clock()
        own = self._own.entry(key)
        if own is not None and own.replica == replica:
            own = self._own.put(key, replica, seen=now)
        else:
            # Following another instance's placement keeps its time: it is not a new one.
            theirs = self._theirs.entry(key)
            if theirs is not None and theirs.replica == replica:
                own = self._own.put(key, replica, theirs.placed_at, now, theirs.origin)
            else:
                own = self._own.put(key, replica, now, now, self.instance)
            self._theirs.drop(key)
        if self._publish and now - own.shared >= self._refresh_s:
            own.shared = now
            self._news[key] = own

    def live(self, replica: R) -> int:
        """Keys any instance sent to `replica` within the live window, as far as this one
        knows."""
        return self._own.live(replica) + self._theirs.live(replica)

    def in_flight_elsewhere(self, replica: R) -> float:
        """Requests the other instances had in flight to `replica`, on average over their
        last sync interval."""
        return self._in_flight_elsewhere.get(replica, 0.0)

    # --- the sync's side: off the request path -------------------------------------------

    def take_news(self) -> dict[RouteKey, Placement[R]]:
        """This instance's placements not yet handed out (new, moved, or due for a refresh)."""
        news, self._news = self._news, {}
        return news

    def give_back(self, news: Mapping[RouteKey, Placement[R]]) -> None:
        """Take back placements a failed sync could not publish (newer ones stay)."""
        for key, placement in news.items():
            self._news.setdefault(key, placement)

    def learn(self, key: RouteKey, placement: Placement[R]) -> None:
        """Take in a placement another instance published (it may be one this instance
        made, which the other follows)."""
        if placement.seen < self._clock() - self._live_s:
            return
        for held in (self._own, self._theirs):
            known = held.entry(key)
            if known is None:
                continue
            if known.newer_than(placement):
                return
            if not placement.newer_than(known):  # the same placement, used again elsewhere
                held.put(key, known.replica, seen=max(known.seen, placement.seen))
                return
        self._own.drop(key)  # a later placement than this instance's: the key moved
        replica, placed_at, seen = placement.replica, placement.placed_at, placement.seen
        self._theirs.put(key, replica, placed_at, seen, placement.origin)

    def set_peers(self, peers: Mapping[str, PeerLoad[R]]) -> None:
        """Replace what the other instances said of their load."""
        self._peers = {name: load for name, load in peers.items() if name != self.instance}
        self.expire_peers()

    def expire_peers(self) -> None:
        """Forget peers silent for longer than the peer TTL; sum the others' load."""
        horizon = self._clock() - self._peer_ttl_s
        self._peers = {name: load for name, load in self._peers.items() if load.at >= horizon}
        elsewhere: dict[R, float] = {}
        for load in self._peers.values():
            for replica, mean in load.in_flight.items():
                elsewhere[replica] = elsewhere.get(replica, 0.0) + mean
        self._in_flight_elsewhere = elsewhere

    @property
    def peers(self) -> int:
        """How many other instances currently count."""
        return len(self._peers)
