"""Background exchange with Redis: rate-limit spending out and back, task usage out.

Runs every `interval` seconds, never on a request's path. Redis being down only delays the
sync (logged); requests keep flowing on local budgets.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from services.llm_proxy.metrics import Metrics
from services.llm_proxy.ratelimit import RateLimiter, Spending
from services.llm_proxy.usage import UsageLedger, task_usage_key

__all__ = ["RedisSync", "ratelimit_key"]

log = logging.getLogger(__name__)

_USAGE_TTL_S = 7 * 24 * 3600


def ratelimit_key(tenant: str, window: int) -> str:
    """The Redis hash of one tenant's spending in one minute window (fields req, tok)."""
    return f"llm_proxy:ratelimit:{tenant}:{window}"


class RedisSync:
    """Pushes local spending and usage to Redis and pulls the shared totals back."""

    def __init__(
        self,
        redis_url: str,
        limiter: RateLimiter,
        ledger: UsageLedger,
        metrics: Metrics,
        interval_s: float,
    ) -> None:
        # Bounded timeouts: an unreachable Redis must not stall the loop or the shutdown.
        self._redis = aioredis.from_url(redis_url, socket_connect_timeout=1, socket_timeout=2)
        self._metrics = metrics
        self._limiter = limiter
        self._ledger = ledger
        self._interval = interval_s
        self._task: asyncio.Task[None] | None = None
        self._failing = False
        self._window_ttl = int(limiter.window_s * 2) + 1

    def start(self) -> None:
        """Sync in the background until `stop`."""
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        """Stop, after one last sync so no usage is lost."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(RedisError, OSError):
            await self.sync_once()
        await self._redis.aclose()

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.sync_once()
            except (RedisError, OSError) as exc:
                self._metrics.errors["redis_sync"] += 1
                if not self._failing:  # once per outage, not every interval
                    log.warning("redis sync failing, will keep retrying: %s", exc)
                self._failing = True
            else:
                self._failing = False

    async def sync_once(self) -> None:
        """One round trip: add local spending and usage, read the shared totals."""
        window, local = self._limiter.take_local()
        usage = self._ledger.take_pending()
        async with self._redis.pipeline(transaction=False) as pipe:
            for tenant, spent in local.items():
                key = ratelimit_key(tenant, window)
                pipe.hincrby(key, "req", spent.requests)
                pipe.hincrby(key, "tok", spent.tokens)
                pipe.expire(key, self._window_ttl)
            for task_id, entry in usage.items():
                key = task_usage_key(task_id)
                pipe.hincrby(key, "prompt_tokens", entry.prompt_tokens)
                pipe.hincrby(key, "completion_tokens", entry.completion_tokens)
                pipe.hincrby(key, "requests", entry.requests)
                pipe.expire(key, _USAGE_TTL_S)
            try:
                results = await pipe.execute()
            except BaseException:
                # Nothing reached Redis: keep the spending and usage for the next round.
                self._limiter.give_back(window, local)
                self._ledger.give_back(usage)
                raise
        totals = {
            tenant: Spending(int(results[3 * i]), int(results[3 * i + 1]))
            for i, tenant in enumerate(local)
        }
        self._limiter.set_remote(window, totals)
        self._metrics.redis_syncs += 1
