"""The one place Redis clients are made (shared/taskyard/plumbing/redis_clients.py), against real
servers: a URL's database, a bounded pool that makes callers wait, and under Sentinel the master it
names, followed through a real failover (the primary SIGKILLed, a replica promoted)."""

from __future__ import annotations

import asyncio

import pytest
import redis
import redis.asyncio as aioredis
from redis.asyncio.sentinel import SentinelManagedConnection
from redis.backoff import ExponentialWithJitterBackoff
from redis.retry import Retry as SyncRetry
from redis_group import RedisGroup

from taskyard.plumbing.redis_clients import async_client, sync_client
from taskyard.runtime.store.base import outage_retry


class _Marked:
    """A connection mixin the tests can find."""

    def pack_command(self, *args: object) -> list[bytes]:
        return super().pack_command(*args)  # type: ignore[misc]


async def test_a_url_client_is_on_the_urls_database(
    redis_server: str, redis_client: redis.Redis
) -> None:
    client = async_client(f"{redis_server}/3", decode_responses=True)
    try:
        await client.set("where", "db3")
        with sync_client(f"{redis_server}/3", decode_responses=True) as sync:
            assert sync.get("where") == "db3"
        assert redis_client.get("where") is None  # database 0
    finally:
        await client.delete("where")
        await client.aclose()


async def test_a_bounded_pool_makes_a_caller_wait_then_gives_up(redis_server: str) -> None:
    client = async_client(f"{redis_server}/3", max_connections=2, pool_timeout=0.3)
    try:
        # Two callers hold both connections (blocked for a second); the third waits 0.3 s.
        held = [asyncio.create_task(client.blpop(["nothing"], timeout=1)) for _ in range(2)]
        await asyncio.sleep(0.1)
        with pytest.raises(redis.ConnectionError, match="No connection available"):
            await client.ping()
        assert await asyncio.gather(*held) == [None, None]
        assert await client.ping()  # a connection came back
    finally:
        await client.aclose()


async def test_a_bounded_pool_wakes_its_waiters_and_opens_no_more_than_its_bound(
    redis_server: str,
) -> None:
    # The pool's lean checkout (a free connection taken without redis-py's condition) must
    # still hand a released connection to a caller waiting in redis-py's path.
    client = async_client(f"{redis_server}/3", max_connections=2, pool_timeout=5)
    try:
        waits = [client.blpop(["nothing"], timeout=0.05) for _ in range(12)]
        assert (
            await asyncio.gather(*waits, *(client.ping() for _ in range(12)))
            == [None] * 12 + [True] * 12
        )
        pool = client.connection_pool
        assert len(pool._available_connections) + len(pool._in_use_connections) <= 2
        assert not pool._in_use_connections
    finally:
        await client.aclose()


async def test_a_connection_mixin_goes_in_front_of_the_connection_class(redis_server: str) -> None:
    client = async_client(f"{redis_server}/0", connection_mixin=_Marked)
    try:
        connection_class = client.connection_pool.connection_class
        assert issubclass(connection_class, _Marked)
        assert issubclass(connection_class, aioredis.Connection)
        assert await client.ping()
    finally:
        await client.aclose()


async def test_under_sentinel_clients_follow_the_master_through_a_failover(
    redis_group: RedisGroup,
) -> None:
    """The URL's host names nothing that listens: only its database number counts. Each
    kind of client (a bounded pool, a plain one with a connection mixin, a blocking one)
    reaches the primary, then after its SIGKILL the promoted replica, within its retries."""
    url, spec = "redis://nowhere.invalid:1/2", redis_group.sentinels.spec
    retry = outage_retry(20)
    client = async_client(url, spec, max_connections=4, decode_responses=True, retry=retry)
    marked = async_client(url, spec, connection_mixin=_Marked, retry=outage_retry(20))
    sync_retry = SyncRetry(ExponentialWithJitterBackoff(base=0.05, cap=1), 40)
    sync = sync_client(url, spec, decode_responses=True, retry=sync_retry)
    managed = marked.connection_pool.connection_class
    assert issubclass(managed, _Marked) and issubclass(managed, SentinelManagedConnection)
    try:
        assert await marked.ping()
        await client.set("before", "1")
        assert await client.wait(1, 2000) == 1  # on the replica too
        with redis.Redis.from_url(f"{redis_group.primary_url}/2") as primary:
            assert primary.get("before") == b"1"  # the primary's database 2
        redis_group.processes.kill("redis")
        await client.set("after", "2")  # retried until the replica is promoted
        # The client found the promoted master; a sentinel asked first may still be catching
        # up with the vote, so wait for the sentinels to name it.
        promoted = redis_group.sentinels.wait_promoted(redis_group.sentinels.primary_port)
        assert promoted[1] == redis_group.sentinels.replica_port
        assert sync.get("before") == "1" and sync.get("after") == "2"
        assert sync.info("replication")["role"] == "master"
        assert await marked.get("after") == b"2"
    finally:
        sync.close()
        await marked.aclose()
        await client.aclose()
