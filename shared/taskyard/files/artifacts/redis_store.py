"""The artifact store in the store's Redis (the default backend): a task's artifacts are one
hash, name to bytes, beside a count of their bytes; both expire `retention_s` after the task's
last artifact was kept. Bounded so Redis memory stays planned: at most `artifact_max_bytes`
each and `task_max_bytes` per task, checked and written in one script, so parallel tool calls
of a task cannot pass the budget together. Bytes travel raw: this client does not decode."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import cast

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from taskyard.files.artifacts.names import is_artifact_name, is_task_id
from taskyard.files.artifacts.store import (
    ArtifactBody,
    ArtifactLimits,
    ArtifactStoreUnavailable,
    Expiry,
    StoredArtifact,
    check_put,
    duration,
    over_task_budget,
)
from taskyard.plumbing import keys
from taskyard.plumbing.redis_clients import SentinelSpec, async_client

__all__ = ["RedisArtifactStore"]

# KEYS: the task's artifacts, their byte count. ARGV: name, data, the task's budget, ttl (ms).
# 1: kept (or kept already: the same name is the same bytes); 0: over the budget.
_PUT = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  local size = string.len(ARGV[2])
  if tonumber(redis.call('GET', KEYS[2]) or '0') + size > tonumber(ARGV[3]) then return 0 end
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  redis.call('INCRBY', KEYS[2], size)
end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return 1
"""
# KEYS: the task's artifacts. Name, size, name, size, ...
_LIST = """
local listed = {}
for _, name in ipairs(redis.call('HKEYS', KEYS[1])) do
  listed[#listed + 1] = name
  listed[#listed + 1] = redis.call('HSTRLEN', KEYS[1], name)
end
return listed
"""


class RedisArtifactStore:
    """Artifacts in Redis, on a client that does not decode responses."""

    def __init__(self, client: aioredis.Redis, limits: ArtifactLimits) -> None:
        self.r = client
        self.limits = limits
        self._put = client.register_script(_PUT)
        self._list = client.register_script(_LIST)

    @classmethod
    def from_url(
        cls,
        url: str,
        limits: ArtifactLimits,
        max_connections: int = 64,
        sentinel: SentinelSpec | None = None,
    ) -> RedisArtifactStore:
        """On a bounded pool of its own: a download waits for a connection, never opens more
        (on the master `sentinel` names, if given)."""
        client = async_client(
            url, sentinel, max_connections=max_connections, pool_timeout=30,
            client_name="taskyard-artifacts",
        )  # fmt: skip
        return cls(client, limits)

    async def put(self, task_id: str, name: str, data: bytes) -> None:
        check_put(task_id, name, len(data), self.limits)
        names = [keys.task_artifacts(task_id), keys.task_artifact_bytes(task_id)]
        ttl_ms = int(self.limits.retention_s * 1000)
        args: list[str | bytes | int] = [name, data, self.limits.task_max_bytes, ttl_ms]
        with _unavailable():
            kept = await self._put(keys=names, args=args)
        if not kept:
            raise over_task_budget(self.limits)

    async def open(self, task_id: str, name: str) -> ArtifactBody | None:
        if not (is_task_id(task_id) and is_artifact_name(name)):
            return None
        with _unavailable():
            found = await self.r.hget(keys.task_artifacts(task_id), name)
        data = cast("bytes | None", found)  # bytes: this client does not decode
        return None if data is None else ArtifactBody(name, data)

    async def task_artifacts(self, task_id: str) -> list[StoredArtifact]:
        if not is_task_id(task_id):
            return []
        with _unavailable():
            flat: list[bytes | int] = await self._list(keys=[keys.task_artifacts(task_id)])
        pairs = zip(flat[::2], flat[1::2], strict=True)
        listed = [StoredArtifact(bytes(name).decode(), int(size)) for name, size in pairs]
        return sorted(listed, key=lambda artifact: artifact.name)

    async def expiry(self) -> Expiry:
        after = duration(self.limits.retention_s)
        how = f"each task's artifacts expire {after} after its last one (a Redis TTL)"
        return Expiry(self.limits.retention_s, how)

    async def close(self) -> None:
        await self.r.aclose()


@contextmanager
def _unavailable() -> Iterator[None]:
    try:
        yield
    except RedisError as exc:
        raise ArtifactStoreUnavailable(f"the artifact store (Redis) failed: {exc}") from exc
