"""Routing policies: pure decisions over the replica state they are handed.

A policy answers one question, `route(group, key, exclude)`: which replica of the group takes
this request. It may return only a replica that is healthy, not excluded (already tried) and
under its in-flight maximum; None means none qualifies right now (the caller then queues the
request or, if nothing is healthy, fails it).

- `AffinityPolicy` (default): consistent hashing with bounded load (Mirrokni et al. 2018) on
  the request's key (the session id, else a hash of the prompt's leading characters). A key
  has a home replica, kept while it is healthy and not much slower than the others. A request
  goes home while the home's in-flight requests are under `load_factor` x its weighted share;
  past that, that one request spills to the next fitting replica on the key's ring path (a hot
  shared prefix spreads, and comes back). A new or homeless key walks its ring path to the
  first fitting replica whose count of live keys is under its share (`key_factor`), so each
  replica holds its share of the sessions' prefix caches. Without a key, least outstanding.
  Placements and in-flight requests come from a `FleetView`: this instance's own, merged
  with what the other proxy instances last published (`fleet.py`), so N instances route like
  one.
- `RoundRobinPolicy`: the baseline the benchmark compares against.
- `LeastOutstandingPolicy`: fewest in-flight requests per unit of weight.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Container, Sequence
from typing import Protocol

from services.llm_proxy.routing.fleet import FleetView
from services.llm_proxy.routing.ring import HashRing

__all__ = [
    "POLICIES",
    "AffinityPolicy",
    "LeastOutstandingPolicy",
    "ReplicaState",
    "RoundRobinPolicy",
    "RoutingPolicy",
    "make_policy",
]

# Below this a latency gap is noise, not a slow replica.
_SLOW_FLOOR_MS = 20.0


class ReplicaState(Protocol):
    """What a policy reads of a replica (hashable by identity: placements remember it)."""

    def __hash__(self) -> int: ...

    @property
    def healthy(self) -> bool: ...
    @property
    def in_flight(self) -> int: ...
    @property
    def weight(self) -> float: ...
    @property
    def has_room(self) -> bool: ...
    @property
    def latency_ms(self) -> float: ...


class GroupState(Protocol):
    """What a policy reads of a model group."""

    @property
    def name(self) -> str: ...
    @property
    def replicas(self) -> Sequence[ReplicaState]: ...
    @property
    def ring(self) -> HashRing: ...


class RoutingPolicy(Protocol):
    """Picks the replica of a group for one request."""

    def route(
        self, group: GroupState, key: int | None, exclude: Container[ReplicaState]
    ) -> ReplicaState | None: ...


def _eligible(group: GroupState, exclude: Container[ReplicaState]) -> list[ReplicaState]:
    return [r for r in group.replicas if r.healthy and r.has_room and r not in exclude]


def _outstanding(replica: ReplicaState) -> tuple[float, float]:
    return replica.in_flight / replica.weight, replica.latency_ms


def _least_outstanding(candidates: Sequence[ReplicaState]) -> ReplicaState | None:
    return min(candidates, key=_outstanding) if candidates else None


class LeastOutstandingPolicy:
    """Fewest requests in flight per unit of weight; ties go to the faster replica."""

    def route(
        self, group: GroupState, key: int | None, exclude: Container[ReplicaState]
    ) -> ReplicaState | None:
        return _least_outstanding(_eligible(group, exclude))


class RoundRobinPolicy:
    """Each group's replicas in turn, skipping those that cannot take a request."""

    def __init__(self) -> None:
        self._next: dict[str, int] = {}

    def route(
        self, group: GroupState, key: int | None, exclude: Container[ReplicaState]
    ) -> ReplicaState | None:
        replicas = group.replicas
        start = self._next.get(group.name, 0)
        for step in range(len(replicas)):
            replica = replicas[(start + step) % len(replicas)]
            if replica.healthy and replica.has_room and replica not in exclude:
                self._next[group.name] = (start + step + 1) % len(replicas)
                return replica
        return None


class AffinityPolicy:
    """Consistent hashing with bounded load on the request's key; see the module docstring."""

    def __init__(
        self,
        load_factor: float = 1.25,
        slow_factor: float = 4.0,
        key_factor: float = 1.0,
        view: FleetView[ReplicaState] | None = None,
    ) -> None:
        self._load_factor = load_factor
        self._slow_factor = slow_factor
        self._key_factor = key_factor
        self._view: FleetView[ReplicaState] = view or FleetView()

    def route(
        self, group: GroupState, key: int | None, exclude: Container[ReplicaState]
    ) -> ReplicaState | None:
        candidates = _eligible(group, exclude)
        if not candidates:
            return None
        if key is None:
            return min(candidates, key=self._outstanding)
        load = sum(self._in_flight(r) for r in candidates) + 1.0
        weights = sum(r.weight for r in candidates)
        home = self._view.get((group.name, key))
        if home is None or home not in candidates or self._is_slow(home, candidates):
            home = self._place(group, key, candidates, load, weights)
        self._view.put((group.name, key), home)
        if self._under_load(home, load, weights):
            return home
        # The home is busy: this one request spills along the key's ring path; the key stays.
        fitting = [r for r in candidates if self._fits(r, candidates, load, weights)]
        for index in group.ring.preference(key):
            if group.replicas[index] in fitting:
                return group.replicas[index]
        return min(candidates, key=self._outstanding)

    def _place(
        self,
        group: GroupState,
        key: int,
        candidates: list[ReplicaState],
        load: float,
        weights: float,
    ) -> ReplicaState:
        # A new key, or one whose home is gone or slow: the first replica on its ring path
        # under both bounds, in-flight requests and live keys; else the fitting one with the
        # fewest keys.
        view = self._view
        keys = sum(view.live(r) for r in candidates) + 1
        fitting = [r for r in candidates if self._fits(r, candidates, load, weights)]
        for index in group.ring.preference(key):
            replica = group.replicas[index]
            bound = math.ceil(self._key_factor * keys * replica.weight / weights)
            if replica in fitting and view.live(replica) < bound:
                return replica
        if fitting:
            return min(fitting, key=lambda r: view.live(r) / r.weight)
        return min(candidates, key=self._outstanding)

    def _in_flight(self, replica: ReplicaState) -> float:
        # Every instance's requests: a replica is as busy as the fleet keeps it.
        return replica.in_flight + self._view.in_flight_elsewhere(replica)

    def _outstanding(self, replica: ReplicaState) -> tuple[float, float]:
        return self._in_flight(replica) / replica.weight, replica.latency_ms

    def _fits(
        self, replica: ReplicaState, candidates: list[ReplicaState], load: float, weights: float
    ) -> bool:
        return self._under_load(replica, load, weights) and not self._is_slow(replica, candidates)

    def _under_load(self, replica: ReplicaState, load: float, weights: float) -> bool:
        bound = math.ceil(self._load_factor * load * replica.weight / weights)
        return self._in_flight(replica) < bound

    def _is_slow(self, replica: ReplicaState, candidates: Sequence[ReplicaState]) -> bool:
        # Compared with the median of the others, so one fast outlier does not make the rest
        # look slow; with prefix caching, latencies legitimately differ a few times over.
        latency = replica.latency_ms
        if not self._slow_factor or latency <= _SLOW_FLOOR_MS:
            return False
        others = [r.latency_ms for r in candidates if r is not replica and r.latency_ms > 0]
        return bool(others) and latency > self._slow_factor * statistics.median(others)


POLICIES: dict[str, Callable[[], RoutingPolicy]] = {
    "affinity": AffinityPolicy,
    "round_robin": RoundRobinPolicy,
    "least_outstanding": LeastOutstandingPolicy,
}


def make_policy(
    name: str,
    load_factor: float,
    slow_factor: float = 4.0,
    view: FleetView[ReplicaState] | None = None,
) -> RoutingPolicy:
    """The policy registered under `name`; affinity routing reads and records in `view`."""
    if name not in POLICIES:
        raise ValueError(f"unknown routing policy {name!r}; choose from {sorted(POLICIES)}")
    if name == "affinity":
        return AffinityPolicy(load_factor, slow_factor, view=view)
    return POLICIES[name]()
