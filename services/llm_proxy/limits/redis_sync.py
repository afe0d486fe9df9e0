"""Background exchange with Redis: rate-limit spending out and back.

Runs every `interval` seconds, never on a request's path. Redis being down only delays the
sync (logged); requests keep flowing on local budgets.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from redis.exceptions import RedisError

from services.llm_proxy.accounting.metrics import Metrics
from services.llm_proxy.limits.ratelimit import RateLimiter, Spending
from shared.keys import proxy_ratelimit
from shared.redis_clients import SentinelSpec, async_client

__all__ = ["RedisSync"]

log = logging.getLogger(__name__)


class RedisSync:
    """Pushes local spending to Redis and pulls the shared totals back."""

    def __init__(
        self,
        redis_url: str,
        limiter: RateLimiter,
        metrics: Metrics,
        interval_s: float,
        sentinel: SentinelSpec | None = None,
    ) -> None:
        # Bounded timeouts: an unreachable Redis must not stall the loop or the shutdown.
        self._redis = async_client(redis_url, sentinel, socket_connect_timeout=1, socket_timeout=2)
        self._metrics = metrics
        self._limiter = limiter
        self._interval = interval_s
        self._task: asyncio.Task[None] | None = None
        self._failing = False
        self._window_ttl = int(limiter.window_s * 2) + 1

    def start(self) -> None:
        """Sync in the background until `stop`."""
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        """Stop, after one last sync so no spending is lost."""
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
        """One round trip: add local spending, read the shared totals."""
        window, local = self._limiter.take_local()
        async with self._redis.pipeline(transaction=False) as pipe:
            for tenant, spent in local.items():
                key = proxy_ratelimit(tenant, window)
                pipe.hincrby(key, "req", spent.requests)
                pipe.hincrby(key, "tok", spent.tokens)
                pipe.expire(key, self._window_ttl)
            try:
                results = await pipe.execute()
            except BaseException:
                # Nothing reached Redis: keep the spending for the next round.
                self._limiter.give_back(window, local)
                raise
        totals = {
            tenant: Spending(int(results[3 * i]), int(results[3 * i + 1]))
            for i, tenant in enumerate(local)
        }
        self._limiter.set_remote(window, totals)
        self._metrics.redis_syncs += 1
