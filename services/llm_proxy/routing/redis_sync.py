"""Background exchange with Redis: this instance's placements and load out, the others' back.

Every `interval_s` (0.1 s), never on a request's path, one pipelined round trip:

- the placements this instance made since the last round go to the `PROXY_PLACEMENTS` stream,
  as one entry (entries older than the live window are trimmed, by Redis's clock; the key
  expires when no instance wrote for that long);
- this instance's per-replica load (requests in flight, as their mean since the last round)
  goes under its name in the `PROXY_LOAD` hash (the key expires `ttl_s` after the last write;
  a field older than `ttl_s` is ignored and removed: a dead instance's load stops counting);
- the stream is read on from where this instance left off, and the hash whole; both go to the
  `FleetView`.

Redis being down only delays the exchange (logged once per outage): routing goes on from this
instance's own state, the others' load is forgotten after `ttl_s`, their placements after the
live window.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from redis.typing import EncodableT, FieldT

from services.llm_proxy.accounting.metrics import Metrics
from services.llm_proxy.replicas.pool import Replica
from services.llm_proxy.routing.fleet import FleetView, PeerLoad, RouteKey
from services.llm_proxy.routing.placements import Placement
from services.llm_proxy.routing.policies import ReplicaState
from services.llm_proxy.sync_loop import SyncLoop
from taskyard.plumbing.keys import PROXY_LOAD, PROXY_PLACEMENTS
from taskyard.plumbing.redis_clients import SentinelSpec

__all__ = ["PlacementSync"]

# Stream entries read per round: an instance that starts late catches up over a few rounds.
_READ_COUNT = 500

# One published placement: group, key hash, replica, placed at, last seen (wall clock), and
# the instance that placed it (the entry's publisher may be one that follows it).
_Placed = tuple[str, int, str, float, float, str]
_PLACED = TypeAdapter(list[_Placed])


class _Load(BaseModel):
    """One instance's published load: when, and per replica its mean requests in flight."""

    # Fields a newer version adds are passed over: instances of two versions run side by side
    # during a rolling upgrade.
    model_config = ConfigDict(frozen=True, extra="ignore")

    t: float
    r: dict[str, float]


class PlacementSync(SyncLoop):
    """Publishes this instance's placements and load; hands the others' to the view."""

    error_kind = "placement_sync"
    while_failing = "routing on local state"

    def __init__(
        self,
        redis_url: str,
        view: FleetView[ReplicaState],
        replicas: Sequence[Replica],
        metrics: Metrics,
        interval_s: float,
        ttl_s: float,
        live_s: float,
        clock: Callable[[], float] = time.time,
        *,
        sentinel: SentinelSpec | None = None,
    ) -> None:
        super().__init__(redis_url, metrics, interval_s, sentinel)
        self._view = view
        self._replicas = list(replicas)
        self._ids: dict[ReplicaState, str] = {r: r.shared_id for r in replicas}
        self._by_id: dict[str, ReplicaState] = {r.shared_id: r for r in replicas}
        self._ttl_s = ttl_s
        self._live_ms = int(live_s * 1000)
        self._clock = clock
        self._read_from: bytes = b"0-0"
        self._trim_below: str | None = None  # a stream id: Redis's clock, not ours
        self._silent: list[str] = []  # peers whose load field is past the TTL
        # Per replica, its `busy` integral and the loop time at the last publication.
        self._busy: dict[Replica, tuple[float, float]] = {}

    def start(self) -> None:
        """Sync in the background until `stop`."""
        now = asyncio.get_running_loop().time()
        self._busy = {r: (r.busy(now), now) for r in self._replicas}
        super().start()

    async def _last_round(self) -> None:
        """The last placements out, and this instance's load withdrawn."""
        await self.sync_once()
        await self._redis.hdel(PROXY_LOAD, self._view.instance)

    def _failed(self) -> None:
        self._view.expire_peers()
        self._metrics.peers = self._view.peers

    async def sync_once(self) -> None:
        """One round trip: publish placements and load, read the others'."""
        news = self._view.take_news()
        try:
            results = await self._exchange(news)
        except BaseException:
            self._view.give_back(news)  # nothing reached Redis: publish them next round
            raise
        if news:
            self._trim_below = self._trim_id(results[0])
        self._silent = []
        self._take_placements(results[-2])
        self._take_load(results[-1])
        self._metrics.placement_syncs += 1
        self._metrics.peers = self._view.peers

    async def _exchange(self, news: Mapping[RouteKey, Placement[ReplicaState]]) -> list[Any]:
        me = self._view.instance
        async with self._redis.pipeline(transaction=False) as pipe:
            if news:
                entry: dict[FieldT, EncodableT] = {"i": me, "p": self._encode(news)}
                pipe.xadd(PROXY_PLACEMENTS, entry, minid=self._trim_below, approximate=True)
                pipe.pexpire(PROXY_PLACEMENTS, self._live_ms)
            pipe.hset(PROXY_LOAD, me, self._own_load())
            if self._silent:
                pipe.hdel(PROXY_LOAD, *self._silent)
            pipe.pexpire(PROXY_LOAD, int(self._ttl_s * 1000))
            pipe.xread({PROXY_PLACEMENTS: self._read_from}, count=_READ_COUNT)
            pipe.hgetall(PROXY_LOAD)
            return await pipe.execute()

    def _encode(self, news: Mapping[RouteKey, Placement[ReplicaState]]) -> bytes:
        return orjson.dumps(
            [
                (group, key, self._ids[p.replica], p.placed_at, p.seen, p.origin)
                for (group, key), p in news.items()
            ]
        )

    def _own_load(self) -> bytes:
        now = asyncio.get_running_loop().time()  # the clock `Replica.begin` and `end` use
        load = {r.shared_id: self._mean_in_flight(r, now) for r in self._replicas}
        return orjson.dumps({"t": self._clock(), "r": load})

    def _mean_in_flight(self, replica: Replica, now: float) -> float:
        busy = replica.busy(now)
        before, then = self._busy.get(replica, (busy, now))
        self._busy[replica] = (busy, now)
        return round((busy - before) / (now - then), 3) if now > then else replica.in_flight

    def _trim_id(self, added: bytes) -> str:
        # The entry just added carries Redis's time: keep the live window behind it.
        millis = int(added.split(b"-")[0])
        return f"{millis - self._live_ms}-0"

    def _take_placements(self, reply: list[Any] | None) -> None:
        for _, entries in reply or ():
            for entry_id, fields in entries:
                self._read_from = entry_id
                if fields.get(b"i", b"").decode() == self._view.instance:
                    continue  # this instance's own entry, read back
                try:
                    placed = _PLACED.validate_json(fields.get(b"p", b""))
                except ValidationError:
                    self._metrics.errors["placement_payload"] += 1
                    continue
                self._learn(placed)

    def _learn(self, placed: list[_Placed]) -> None:
        for group, key, replica_id, placed_at, seen, origin in placed:
            replica = self._by_id.get(replica_id)
            if replica is not None:  # a replica this instance is not configured with: skip
                self._view.learn((group, key), Placement(replica, placed_at, seen, origin))

    def _take_load(self, reply: dict[bytes, bytes]) -> None:
        horizon = self._clock() - self._ttl_s
        peers: dict[str, PeerLoad[ReplicaState]] = {}
        for field, raw in reply.items():
            name = field.decode()
            if name == self._view.instance:
                continue
            try:
                load = _Load.model_validate_json(raw)
            except ValidationError:
                self._metrics.errors["placement_payload"] += 1
                continue
            if load.t < horizon:
                self._silent.append(name)
                continue
            peers[name] = self._peer_load(load)
        self._view.set_peers(peers)

    def _peer_load(self, load: _Load) -> PeerLoad[ReplicaState]:
        known = {self._by_id[i]: mean for i, mean in load.r.items() if i in self._by_id}
        return PeerLoad(load.t, known)
