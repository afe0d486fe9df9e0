"""Routing policies: pure decisions over the replica state they are handed.

A policy answers one question, `route(group, key, exclude)`: which replica of the group takes
this request. It may return only a replica that is healthy, not excluded (already tried) and
under its in-flight maximum; None means none qualifies right now (the caller then queues the
request or, if nothing is healthy, fails it).

- `AffinityPolicy` (default): a request with a key (the session id, else a hash of the
  prompt's leading characters) goes to the first replica on a consistent-hash ring whose load
  is under `load_factor` x its weighted share of the group's load (consistent hashing with
  bounded load, Mirrokni et al. 2018), skipping replicas much slower than the fastest. Without
  a key, or when every replica on the ring is over its bound, least outstanding requests.
- `RoundRobinPolicy`: the baseline the benchmark compares against.
- `LeastOutstandingPolicy`: fewest in-flight requests per unit of weight.
"""

from __future__ import annotations

import bisect
import hashlib
import math
from collections.abc import Container, Sequence
from typing import Protocol

__all__ = [
    "POLICIES",
    "AffinityPolicy",
    "HashRing",
    "LeastOutstandingPolicy",
    "ReplicaState",
    "RoundRobinPolicy",
    "RoutingPolicy",
    "hash_key",
    "make_policy",
]

_POINTS_PER_WEIGHT = 100
# Below this a latency gap is noise, not a slow replica.
_SLOW_FLOOR_MS = 20.0


def hash_key(data: bytes) -> int:
    """A stable 64-bit hash for ring positions and routing keys."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


class ReplicaState(Protocol):
    """What a policy reads of a replica."""

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


class HashRing:
    """A consistent-hash ring; each position knows the order of replicas walking from it."""

    def __init__(self, names: Sequence[str], weights: Sequence[float]) -> None:
        points: list[tuple[int, int]] = []
        for index, (name, weight) in enumerate(zip(names, weights, strict=True)):
            count = max(1, round(weight * _POINTS_PER_WEIGHT))
            points.extend((hash_key(f"{name}#{i}".encode()), index) for i in range(count))
        points.sort()
        self._hashes = [h for h, _ in points]
        owners = [index for _, index in points]
        self._orders = [self._walk(owners, start, len(names)) for start in range(len(owners))]

    @staticmethod
    def _walk(owners: list[int], start: int, distinct: int) -> tuple[int, ...]:
        order: list[int] = []
        for step in range(len(owners)):
            owner = owners[(start + step) % len(owners)]
            if owner not in order:
                order.append(owner)
                if len(order) == distinct:
                    break
        return tuple(order)

    def preference(self, key: int) -> tuple[int, ...]:
        """Replica indexes in the order a request with `key` should try them."""
        if not self._hashes:
            return ()
        return self._orders[bisect.bisect(self._hashes, key) % len(self._hashes)]


class RoutingPolicy(Protocol):
    """Picks the replica of a group for one request."""

    def route(
        self, group: GroupState, key: int | None, exclude: Container[ReplicaState]
    ) -> ReplicaState | None: ...


def _eligible(group: GroupState, exclude: Container[ReplicaState]) -> list[ReplicaState]:
    return [r for r in group.replicas if r.healthy and r.has_room and r not in exclude]


def _least_outstanding(candidates: Sequence[ReplicaState]) -> ReplicaState | None:
    if not candidates:
        return None
    return min(candidates, key=lambda r: (r.in_flight / r.weight, r.latency_ms))


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

    def __init__(self, load_factor: float = 1.25, slow_factor: float = 4.0) -> None:
        self._load_factor = load_factor
        self._slow_factor = slow_factor

    def route(
        self, group: GroupState, key: int | None, exclude: Container[ReplicaState]
    ) -> ReplicaState | None:
        candidates = _eligible(group, exclude)
        if key is None or not candidates:
            return _least_outstanding(candidates)
        load = sum(r.in_flight for r in candidates) + 1
        weights = sum(r.weight for r in candidates)
        fastest = min((r.latency_ms for r in candidates if r.latency_ms > 0), default=0.0)
        replicas = group.replicas
        for index in group.ring.preference(key):
            replica = replicas[index]
            if replica not in candidates:
                continue
            bound = math.ceil(self._load_factor * load * replica.weight / weights)
            if replica.in_flight < bound and not self._is_slow(replica, fastest):
                return replica
        return _least_outstanding(candidates)

    def _is_slow(self, replica: ReplicaState, fastest: float) -> bool:
        latency = replica.latency_ms
        return fastest > 0 and latency > _SLOW_FLOOR_MS and latency > self._slow_factor * fastest


POLICIES = {
    "affinity": AffinityPolicy,
    "round_robin": RoundRobinPolicy,
    "least_outstanding": LeastOutstandingPolicy,
}


def make_policy(name: str, load_factor: float) -> RoutingPolicy:
    """The policy registered under `name`."""
    if name not in POLICIES:
        raise ValueError(f"unknown routing policy {name!r}; choose from {sorted(POLICIES)}")
    if name == "affinity":
        return AffinityPolicy(load_factor)
    return POLICIES[name]()
