"""The proxy's background exchanges with Redis (rate-limit spending, placements and load):
one round every `interval_s`, never on a request's path, through a client with bounded
timeouts. A failing round is counted and logged once per outage; requests go on from this
instance's own state meanwhile. `stop` runs one last round, so nothing taken locally is lost."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from abc import ABC, abstractmethod

from redis.exceptions import RedisError

from services.llm_proxy.accounting.metrics import Metrics
from taskyard.plumbing.redis_clients import SentinelSpec, async_client

__all__ = ["SyncLoop"]

log = logging.getLogger(__name__)


class SyncLoop(ABC):
    """Subclasses say what a round does (`sync_once`); `error_kind` names the errors metric
    a failed round counts under, `while_failing` what the proxy does meanwhile (logged)."""

    error_kind: str
    while_failing: str

    def __init__(
        self, redis_url: str, metrics: Metrics, interval_s: float, sentinel: SentinelSpec | None
    ) -> None:
        # Bounded timeouts: an unreachable Redis must not stall the loop or the shutdown.
        self._redis = async_client(redis_url, sentinel, socket_connect_timeout=1, socket_timeout=2)
        self._metrics = metrics
        self._interval = interval_s
        self._task: asyncio.Task[None] | None = None
        self._failing = False

    @abstractmethod
    async def sync_once(self) -> None:
        """One round trip with Redis."""

    def start(self) -> None:
        """Sync in the background until `stop`."""
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        """Stop, after one last round (`_last_round`)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(RedisError, OSError):
            await self._last_round()
        await self._redis.aclose()

    async def _last_round(self) -> None:
        await self.sync_once()

    def _failed(self) -> None:
        """What a failed round changes besides the count (nothing by default)."""
        return None

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.sync_once()
            except (RedisError, OSError) as exc:
                self._metrics.errors[self.error_kind] += 1
                if not self._failing:  # once per outage, not every interval
                    what = self.error_kind.replace("_", " ")
                    log.warning("%s failing, %s: %s", what, self.while_failing, exc)
                self._failing = True
                self._failed()
            else:
                self._failing = False
