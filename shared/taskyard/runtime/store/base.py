"""What every part of the store stands on: the Redis client, the store's and the broker's
database numbers, and the Lua scripts (`taskyard.runtime.store.scripts`), each called with its keys
and one JSON document (`taskyard.runtime.store.documents`).

Async (redis-py's asyncio client), used by the gateway and the agent worker on their event
loops; sync callers (the tool worker) run it through `taskyard.plumbing.loop.LoopThread`. Every
change a step depends on is one Lua script, so it is atomic and costs one round trip: a redelivered
job finds its step already committed and stops.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, Self

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import NoScriptError

from taskyard.agentkit.text import replace_lone_surrogates
from taskyard.errors import TaskyardError
from taskyard.plumbing.redis_clients import HIREDIS_PACKED, SentinelSpec, async_client
from taskyard.plumbing.settings import BrokerSettings, broker_database
from taskyard.runtime.events import dumps
from taskyard.runtime.store.script_keys import ScriptKeys, flat, script_keys
from taskyard.runtime.store.scripts import SCRIPTS, source

__all__ = ["NotReplicated", "ScriptedStore", "outage_retry"]


class NotReplicated(TaskyardError):
    """Fewer replicas than asked confirmed a write in time: it is on the primary, and a
    failover now could lose it."""

    def __init__(self, wanted: int, confirmed: int, timeout_ms: int) -> None:
        super().__init__(f"{confirmed} of {wanted} replicas confirmed the write in {timeout_ms} ms")
        self.wanted = wanted
        self.confirmed = confirmed
        self.timeout_ms = timeout_ms


class ScriptedStore:
    """Typed access to taskyard's Redis keys. Takes a client, so tests hand in their own.

    `broker_db` is the database of Celery's broker on the same server: the scripts push the
    jobs a write starts there, in the same atomic step (see `taskyard.runtime.jobs`).
    """

    def __init__(self, client: aioredis.Redis, broker_db: int = 1) -> None:
        self.r = client
        self.db = int(client.connection_pool.connection_kwargs.get("db", 0))
        self.broker_db = broker_db
        self._scripts = {name: client.register_script(source(name)) for name in SCRIPTS}

    @classmethod
    def from_url(
        cls,
        url: str,
        broker_url: str,
        max_connections: int = 64,
        client_name: str | None = None,
        outage_retries: int = 20,
        sentinel: SentinelSpec | None = None,
    ) -> Self:
        """A store on a bounded pool: a thousand steps in flight share a few connections
        instead of opening one each. `client_name` names them in Redis's CLIENT LIST. A lost
        connection is retried `outage_retries` times (20: about a minute, what a Redis restart
        takes; a gateway answering people waits less), on the master `sentinel` names now
        when there is one (a failover takes seconds)."""
        client = async_client(
            url, sentinel, max_connections=max_connections, pool_timeout=30,
            decode_responses=True, client_name=client_name, retry=outage_retry(outage_retries),
            connection_mixin=HIREDIS_PACKED,
        )  # fmt: skip
        return cls(client, broker_database(url, broker_url, sentinel=sentinel is not None))

    @classmethod
    def from_settings(
        cls, settings: BrokerSettings, client_name: str, outage_retries: int = 20
    ) -> Self:
        """The store the settings name (their URLs, or Sentinel's master), as `from_url`."""
        return cls.from_url(
            settings.redis_url, settings.broker_url, settings.redis_max_connections,
            client_name, outage_retries, settings.sentinel,
        )  # fmt: skip

    async def close(self) -> None:
        await self.r.aclose()

    async def script(self, name: str, keys_: ScriptKeys | None, doc: Mapping[str, Any]) -> Any:
        """Run the script `name` ("steps/commit_step") on its keys (`script_keys`: None for
        a script that takes none) with its document and this process's clock."""
        return await self._scripts[name](keys=_keys(name, keys_), args=[dumps(doc), now()])

    async def replicated(
        self, name: str, keys_: ScriptKeys, doc: Mapping[str, Any], replicas: int,
        timeout_ms: int,
    ) -> tuple[Any, int]:  # fmt: skip
        """Run a script, then WAIT on the same connection (WAIT counts the replicas holding
        that connection's writes) until `replicas` replicas hold what it wrote: one round
        trip. Its reply, and how many replicas confirmed (0 when none was asked for). The
        script must write whenever its answer needs replicating (see create_task)."""
        if not replicas:
            return await self.script(name, keys_, doc), 0
        script, flat_keys = self._scripts[name], _keys(name, keys_)
        args = [*flat_keys, dumps(doc), now()]
        try:
            return await self._then_wait(script.sha, len(flat_keys), args, replicas, timeout_ms)
        except NoScriptError:  # a new master (after a failover) has an empty script cache
            await self.r.script_load(script.script)
            return await self._then_wait(script.sha, len(flat_keys), args, replicas, timeout_ms)

    async def _then_wait(
        self, sha: str, numkeys: int, args: Sequence[str], replicas: int, timeout_ms: int
    ) -> tuple[Any, int]:
        async with self.r.pipeline(transaction=False) as pipe:
            pipe.evalsha(sha, numkeys, *args)
            pipe.wait(replicas, timeout_ms)
            reply, confirmed = await pipe.execute()
        return reply, int(confirmed)


def _keys(name: str, keys_: ScriptKeys | None) -> list[str]:
    # The script's own keys type, so a script is never handed another's keys by position.
    if type(keys_) is not (script_keys(name) or type(None)):
        raise TypeError(f"{name} takes {script_keys(name)}, not {type(keys_).__name__}")
    return flat(keys_) if keys_ is not None else []


def outage_retry(retries: int) -> Retry:
    """Ride out a Redis restart: retry a command on a lost connection with jittered
    exponential backoff (at most 5 s apart). Every script is safe to run twice."""
    return Retry(ExponentialWithJitterBackoff(base=0.05, cap=5.0), retries=retries)


def pairs(flat: Sequence[str]) -> dict[str, str]:
    return dict(zip(flat[::2], flat[1::2], strict=True))


def now() -> str:
    return dumps(time.time())


def stamp(fields_: Mapping[str, Any]) -> dict[str, str]:
    """Fields as the task's hash holds them, and `updated_at`. Text fields (a result, a
    failure's reason) go to Redis as UTF-8: no lone surrogates."""
    out = {
        k: replace_lone_surrogates(v) if isinstance(v, str) else dumps(v)
        for k, v in fields_.items()
    }
    out["updated_at"] = now()
    return out
