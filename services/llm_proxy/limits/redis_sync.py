"""Background exchange with Redis: rate-limit spending out and back.

Runs every `interval` seconds, never on a request's path. Redis being down only delays the
sync (logged); requests keep flowing on local budgets.
"""

from __future__ import annotations

from services.llm_proxy.accounting.metrics import Metrics
from services.llm_proxy.limits.ratelimit import RateLimiter, Spending
from services.llm_proxy.sync_loop import SyncLoop
from taskyard.plumbing.keys import proxy_ratelimit
from taskyard.plumbing.redis_clients import SentinelSpec

__all__ = ["RedisSync"]


class RedisSync(SyncLoop):
    """Pushes local spending to Redis and pulls the shared totals back."""

    error_kind = "redis_sync"
    while_failing = "will keep retrying"

    def __init__(
        self,
        redis_url: str,
        limiter: RateLimiter,
        metrics: Metrics,
        interval_s: float,
        sentinel: SentinelSpec | None = None,
    ) -> None:
        super().__init__(redis_url, metrics, interval_s, sentinel)
        self._limiter = limiter
        self._window_ttl = int(limiter.window_s * 2) + 1

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
