"""Consistent hashing: a stable key hash, and the ring whose walk orders a group's replicas."""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Sequence

__all__ = ["HashRing", "hash_key"]

_POINTS_PER_WEIGHT = 100


def hash_key(data: bytes) -> int:
    """A stable 64-bit hash for ring positions and routing keys."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


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
