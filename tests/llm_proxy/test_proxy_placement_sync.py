"""The placement sync against a real Redis: two instances' views, each with its own replica
objects (as in two processes), exchanging placements and load; expiry; Redis down."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import orjson
import pytest
import redis

from devstack.procs import free_port
from services.llm_proxy.accounting.metrics import Metrics
from services.llm_proxy.replicas.pool import Pool
from services.llm_proxy.replicas.spec import PoolSpec, ReplicaSpec
from services.llm_proxy.routing.fleet import FleetView
from services.llm_proxy.routing.policies import ReplicaState
from services.llm_proxy.routing.redis_sync import PlacementSync
from services.llm_proxy.settings import ProxySettings
from taskyard.plumbing.keys import PROXY_LOAD, PROXY_PLACEMENTS

SPEC = PoolSpec(tuple(ReplicaSpec(f"http://127.0.0.1:{9000 + i}/v1") for i in range(3)))


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Instance:
    """One proxy instance's routing state and its sync, without the HTTP side."""

    pool: Pool
    view: FleetView[ReplicaState]
    sync: PlacementSync
    metrics: Metrics


Factory = Callable[..., Instance]


@pytest.fixture
async def instance(proxy_redis: str) -> AsyncIterator[Factory]:
    redis.Redis.from_url(proxy_redis).flushdb()
    started: list[Instance] = []

    def make(name: str, clock: Clock, url: str = proxy_redis) -> Instance:
        pool = Pool(SPEC, ProxySettings(proxy_redis_sync=False))
        view: FleetView[ReplicaState] = FleetView(60, 5, clock=clock, instance=name)
        metrics = Metrics(pool, {})
        sync = PlacementSync(url, view, pool.replicas, metrics, 0.1, 5, 60, clock=clock)
        started.append(Instance(pool, view, sync, metrics))
        return started[-1]

    yield make
    for each in started:
        await each.sync.stop()


async def test_placements_and_load_reach_the_other_instance(instance: Factory) -> None:
    clock = Clock()
    a, b = instance("a", clock), instance("b", clock)
    a.view.put(("m", 42), a.pool.replicas[2])
    a.pool.replicas[0].in_flight = 3  # held through the whole interval: a mean of 3
    await a.sync.sync_once()
    await b.sync.sync_once()
    assert b.view.get(("m", 42)) is b.pool.replicas[2]  # b's own object for that replica
    assert b.view.in_flight_elsewhere(b.pool.replicas[0]) == 3 and b.view.peers == 1
    await a.sync.sync_once()
    assert a.view.in_flight_elsewhere(a.pool.replicas[0]) == 0  # its own load: not a peer's
    assert (a.metrics.placement_syncs, b.metrics.peers) == (2, 1)


async def test_the_mean_in_flight_is_published_not_a_sample(instance: Factory) -> None:
    clock = Clock()
    a, b = instance("a", clock), instance("b", clock)
    replica, loop = a.pool.replicas[1], asyncio.get_running_loop()
    await a.sync.sync_once()  # the interval starts
    replica.begin(loop.time())
    await asyncio.sleep(0.1)
    replica.end(loop.time())  # busy half of the interval, idle when it ends
    await asyncio.sleep(0.1)
    await a.sync.sync_once()
    await b.sync.sync_once()
    assert 0.2 < b.view.in_flight_elsewhere(b.pool.replicas[1]) < 0.8


async def test_a_key_moved_by_one_instance_moves_on_the_other(instance: Factory) -> None:
    clock = Clock()
    a, b = instance("a", clock), instance("b", clock)
    a.view.put(("m", 1), a.pool.replicas[0])
    await a.sync.sync_once()
    await b.sync.sync_once()
    b.view.put(("m", 1), b.pool.replicas[0])  # b followed a's placement
    clock.now += 1
    a.view.put(("m", 1), a.pool.replicas[1])  # a's home failed: a placed it again
    await a.sync.sync_once()
    await b.sync.sync_once()
    assert b.view.get(("m", 1)) is b.pool.replicas[1]


async def test_a_placement_followed_elsewhere_stays_its_placers(instance: Factory) -> None:
    clock = Clock()
    a, b = instance("a", clock), instance("b", clock)
    a.view.put(("m", 1), a.pool.replicas[0])
    await a.sync.sync_once()
    await b.sync.sync_once()
    clock.now += 5
    b.view.put(("m", 1), b.pool.replicas[0])  # b follows it, and publishes that it did
    await b.sync.sync_once()
    await a.sync.sync_once()
    a.view.put(("m", 1), a.pool.replicas[0])
    assert a.view.take_news() == {}  # still a's own placement, published 5 s ago: no news
    assert a.view.live(a.pool.replicas[0]) == 1


async def test_a_silent_instance_stops_counting_and_its_load_is_removed(
    instance: Factory, proxy_redis: str
) -> None:
    clock = Clock()
    a, b = instance("a", clock), instance("b", clock)
    a.pool.replicas[0].in_flight = 2
    await a.sync.sync_once()
    await b.sync.sync_once()
    assert b.view.peers == 1
    clock.now += 6  # a said nothing for longer than the 5 s TTL
    await b.sync.sync_once()
    assert b.view.peers == 0 and b.view.in_flight_elsewhere(b.pool.replicas[0]) == 0
    await b.sync.sync_once()  # the round after removes a's field
    fields = redis.Redis.from_url(proxy_redis).hkeys(PROXY_LOAD)
    assert fields == [b"b"]


async def test_shared_keys_expire_and_a_stopped_instance_withdraws_its_load(
    instance: Factory, proxy_redis: str
) -> None:
    clock = Clock()
    a = instance("a", clock)
    a.view.put(("m", 1), a.pool.replicas[0])
    await a.sync.sync_once()
    client = redis.Redis.from_url(proxy_redis)
    assert 0 < client.pttl(PROXY_PLACEMENTS) <= 60_000  # placements live 60 s after use
    assert 0 < client.pttl(PROXY_LOAD) <= 5_000  # load lives the TTL after the last write
    await a.sync.stop()
    assert client.hkeys(PROXY_LOAD) == []


async def test_an_unreadable_entry_is_counted_and_skipped(
    instance: Factory, proxy_redis: str
) -> None:
    clock = Clock()
    client = redis.Redis.from_url(proxy_redis)
    client.xadd(PROXY_PLACEMENTS, {"i": "future", "p": b'{"another": "format"}'})
    client.hset(PROXY_LOAD, "future", b"[1, 2]")
    a = instance("a", clock)
    placed = [["m", 5, "*=http://127.0.0.1:9001/v1", clock(), clock(), "b"]]
    client.xadd(PROXY_PLACEMENTS, {"i": "b", "p": orjson.dumps(placed)})
    await a.sync.sync_once()
    assert a.metrics.errors["placement_payload"] == 2
    assert a.view.get(("m", 5)) is a.pool.replicas[1]  # the readable entry still counts


async def test_with_redis_down_news_wait_for_the_next_sync(instance: Factory) -> None:
    clock = Clock()
    a = instance("a", clock, url=f"redis://127.0.0.1:{free_port()}/0")
    a.view.put(("m", 1), a.pool.replicas[0])
    with pytest.raises((redis.exceptions.ConnectionError, OSError)):
        await a.sync.sync_once()
    assert list(a.view.take_news()) == [("m", 1)]  # kept for when Redis answers again
    assert a.view.get(("m", 1)) is a.pool.replicas[0]  # and routing goes on locally
