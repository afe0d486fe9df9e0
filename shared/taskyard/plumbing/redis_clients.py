"""Every Redis client of every service is made here: on the server a URL names, or, with
Sentinel, on the master the sentinels name.

With Sentinel (`SentinelSpec`, from ``TASKYARD_REDIS_SENTINELS`` and ``TASKYARD_REDIS_MASTER``)
a URL gives only the database number and the credentials; its host and port are not used.
Each connection asks the sentinels for the master whenever it (re)connects, so after a
failover a command in flight fails on the dead server, its retries (the caller's `retry`, as
without Sentinel) reach the promoted replica once the sentinels name it, and idle connections
to the old master are dropped on the way. Celery's clients are kombu's and Celery's own:
`taskyard.plumbing.celery_app` hands them the same settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import redis
import redis.asyncio as aioredis
from redis import sentinel as sync_sentinel
from redis.asyncio import sentinel as async_sentinel
from redis.connection import parse_url
from redis.typing import EncodableT
from redis.utils import HIREDIS_AVAILABLE

if HIREDIS_AVAILABLE:  # redis-py's optional C parser; without it, redis-py packs commands
    import hiredis

__all__ = [
    "HIREDIS_PACKED",
    "SENTINEL_CLIENT_OPTIONS",
    "AsyncMasterConnection",
    "MasterConnection",
    "SentinelSpec",
    "async_client",
    "sync_client",
]

# The connections to the sentinels themselves: they answer in microseconds, so one that does
# not within a second is skipped for the next (Celery's sentinel clients take them too).
SENTINEL_CLIENT_OPTIONS = {"socket_connect_timeout": 1.0, "socket_timeout": 1.0}
# What a URL may say besides the server, kept under Sentinel (credentials, database).
_KEPT_FROM_URL = ("db", "username", "password")


@dataclass(frozen=True, slots=True)
class SentinelSpec:
    """The sentinels to ask (host, port) and the name of the master they monitor."""

    addresses: tuple[tuple[str, int], ...]
    master: str


def async_client(
    url: str,
    sentinel: SentinelSpec | None = None,
    *,
    max_connections: int | None = None,
    pool_timeout: float | None = 20,
    connection_mixin: type | None = None,
    **options: Any,
) -> aioredis.Redis:
    """An asyncio client on the URL's database. With `max_connections` the pool is bounded
    and a caller past it waits up to `pool_timeout` seconds for a connection (a blocking
    pool); without, it opens what it needs. `connection_mixin` is put in front of the
    connection class (one that packs commands differently); `options` are redis-py's.

    Closing the client closes an unbounded pool, not a bounded one: a bounded pool is a
    service's shared one (the store's, whose pubsub a cancel watch reads), and closing it
    under a pubsub still reading hangs that pubsub's cancellation (seen in tests/tool_worker);
    the process's end closes it."""
    bounded = {} if max_connections is None else {"max_connections": max_connections,
                                                  "timeout": pool_timeout}  # fmt: skip
    if sentinel is None:
        pool = _url_pool(url, max_connections, connection_mixin, bounded, options)
        client = aioredis.Redis(connection_pool=pool)
    else:
        pool = _master_pool(url, sentinel, max_connections, connection_mixin, bounded, options)
        client = _AsyncSentinelRedis(connection_pool=pool)
    client.auto_close_connection_pool = max_connections is None
    return client


def _url_pool(
    url: str, max_connections: int | None, mixin: type | None, bounded: dict[str, Any],
    options: dict[str, Any],
) -> aioredis.ConnectionPool:  # fmt: skip
    if mixin is not None:
        options["connection_class"] = _mixed(mixin, aioredis.Connection)
    kind = aioredis.ConnectionPool if max_connections is None else _LeanBlockingPool
    return kind.from_url(url, **bounded, **options)


def _master_pool(
    url: str, sentinel: SentinelSpec, max_connections: int | None, mixin: type | None,
    bounded: dict[str, Any], options: dict[str, Any],
) -> async_sentinel.SentinelConnectionPool:  # fmt: skip
    connection = AsyncMasterConnection if mixin is None else _mixed(mixin, AsyncMasterConnection)
    kind: type[async_sentinel.SentinelConnectionPool] = (
        async_sentinel.SentinelConnectionPool if max_connections is None else _BlockingSentinelPool
    )
    manager = async_sentinel.Sentinel(sentinel.addresses, sentinel_kwargs=SENTINEL_CLIENT_OPTIONS)
    return kind(
        sentinel.master, manager, connection_class=connection, **_from_url(url), **bounded,
        **options,
    )  # fmt: skip


def sync_client(url: str, sentinel: SentinelSpec | None = None, **options: Any) -> redis.Redis:
    """A blocking client on the URL's database (redis-py's `options`)."""
    if sentinel is None:
        return redis.Redis.from_url(url, **options)
    manager = sync_sentinel.Sentinel(sentinel.addresses, sentinel_kwargs=SENTINEL_CLIENT_OPTIONS)
    client = manager.master_for(
        sentinel.master, redis_class=_SyncSentinelRedis, connection_class=MasterConnection,
        **_from_url(url), **options,
    )  # fmt: skip
    return cast(redis.Redis, client)


# redis-py's Sentinel connections ask the sentinels for the master in `connect` only; a
# command's retry reconnects through `_connect`, to the address the connection had: the dead
# master's, until the retries run out (redis/redis-py#3874, open). These ask on every socket
# connect, so a retry reaches the promoted replica once the sentinels name it.


class AsyncMasterConnection(async_sentinel.SentinelManagedConnection):
    """A connection to the master the sentinels name now, on each (re)connect."""

    async def _connect(self) -> None:
        if self.connection_pool.is_master:
            self.host, self.port = await self.connection_pool.get_master_address()
        await super()._connect()  # type: ignore[no-untyped-call]  # redis-py leaves it bare


class MasterConnection(sync_sentinel.SentinelManagedConnection):
    """A blocking connection to the master the sentinels name now, on each (re)connect."""

    def _connect(self) -> Any:
        if self.connection_pool.is_master:
            self.host, self.port = self.connection_pool.get_master_address()
        return super()._connect()  # type: ignore[no-untyped-call]  # redis-py leaves it bare


class _LeanBlockingPool(aioredis.BlockingConnectionPool):
    """A bounded pool whose checkout and release skip redis-py's condition, timeout and
    observability machinery while a connection is free and nobody waits for one: about 30 us
    of CPU of a store command's 120 (measured). Waiting, and opening a connection, take
    redis-py's own path; a free connection is still (re)connected and checked before use."""

    _waiting = 0  # callers in redis-py's path: a release must wake them through its condition

    async def get_connection(self, command_name: Any = None, *keys: Any, **options: Any) -> Any:
        if not self._available_connections or self._waiting or self._in_maintenance:
            return await self._get_waiting()
        connection = self._available_connections.pop()
        self._in_use_connections.add(connection)
        try:
            await self.ensure_connection(connection)
        except BaseException:
            await self.release(connection)
            raise
        return connection

    async def _get_waiting(self) -> Any:
        self._waiting += 1
        try:
            return await super().get_connection()  # type: ignore[no-untyped-call]  # redis-py leaves it bare
        finally:
            self._waiting -= 1

    async def release(self, connection: Any) -> None:
        if self._waiting:
            await super().release(connection)
            return
        if connection.should_reconnect():
            await connection.disconnect()
        self._in_use_connections.remove(connection)  # counted in use until it is free
        self._available_connections.append(connection)


class _BlockingSentinelPool(async_sentinel.SentinelConnectionPool, _LeanBlockingPool):
    """The master's connections, bounded: a caller waits for one instead of opening more."""


class _AsyncSentinelRedis(aioredis.Redis):
    """Closing the client closes its connections to the sentinels too."""

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        await super().aclose(close_connection_pool)
        pool = cast(async_sentinel.SentinelConnectionPool, self.connection_pool)
        await pool.sentinel_manager.aclose()


class _SyncSentinelRedis(redis.Redis):
    """Closing the client closes its connections to the sentinels too."""

    def close(self) -> None:
        super().close()
        pool = cast(sync_sentinel.SentinelConnectionPool, self.connection_pool)
        for client in pool.sentinel_manager.sentinels:
            client.close()


class HiredisPacked:
    """Commands packed in C: redis-py's asyncio connection packs arguments in Python (its
    sync one uses hiredis already), about 10 us of CPU a store command and more for the
    event hub's XREAD naming every followed stream."""

    def pack_command(self, *args: EncodableT) -> list[bytes]:
        name, *rest = args  # redis-py writes some names as one string: "CLIENT SETNAME"
        # hiredis' stub types the command as a 1-tuple; it takes any number of arguments.
        return [hiredis.pack_command((*str(name).split(), *rest))]  # type: ignore[arg-type]


# The connection mixin packing in C, where hiredis is installed.
HIREDIS_PACKED = HiredisPacked if HIREDIS_AVAILABLE else None


def _from_url(url: str) -> dict[str, Any]:
    """What the URL gives a client of Sentinel's master: its database and credentials."""
    parsed = parse_url(url)
    return {name: parsed[name] for name in _KEPT_FROM_URL if parsed.get(name) is not None}


def _mixed(mixin: type, base: type) -> type:
    """`base` with `mixin`'s methods in front: a connection class of the pool's own kind."""
    return type(f"{mixin.__name__}{base.__name__}", (mixin, base), {})
