"""Replica health: passive ejection on failed exchanges, active probes that readmit.

Passive: a connection error ejects a replica at once (a dead replica must stop receiving
traffic immediately); timeouts and 5xx answers eject it after `eject_after` in a row. An
ejected replica rests for a cooldown that doubles with each ejection in a row.
Active: every `interval` each replica is probed (vLLM's `/health`, else `/v1/models`); a
probe that cannot connect ejects a healthy replica, a slow or bad answer counts as a failure,
and a good probe after the cooldown readmits an ejected one.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging

import orjson

from services.llm_proxy.errors import ConnectFailed, UpstreamClosed, UpstreamError
from services.llm_proxy.replicas.pool import Pool, Replica
from services.llm_proxy.replicas.spec import ANY_MODEL

__all__ = ["HealthChecker", "HealthPolicy"]

log = logging.getLogger(__name__)


class _Probe(enum.Enum):
    OK = "ok"
    BAD = "bad"  # answered, but not 200, or too slowly
    UNREACHABLE = "unreachable"  # refused or dropped the connection


class HealthPolicy:
    """Turns exchange outcomes into ejections and readmissions."""

    def __init__(self, eject_after: int, cooldown_s: float, max_cooldown_s: float) -> None:
        self._eject_after = eject_after
        self._cooldown = cooldown_s
        self._max_cooldown = max_cooldown_s

    def succeeded(self, replica: Replica) -> None:
        """A clean exchange: the failure streak (and the ejection streak) ends."""
        replica.failures = 0
        replica.ejections = 0

    def failed(self, replica: Replica, now: float, *, hard: bool) -> None:
        """A failed exchange; `hard` (connection refused or lost) ejects at once."""
        replica.failures = self._eject_after if hard else replica.failures + 1
        if replica.healthy and replica.failures >= self._eject_after:
            self.eject(replica, now)

    def eject(self, replica: Replica, now: float) -> None:
        """Take the replica out of rotation for a cooldown that grows with each ejection."""
        replica.ejections += 1
        cooldown = min(self._cooldown * 2 ** (replica.ejections - 1), self._max_cooldown)
        replica.cooldown_until = now + cooldown
        if replica.healthy:
            log.warning("ejecting %s for %.1fs", replica.name, cooldown)
        replica.healthy = False

    def readmit(self, replica: Replica) -> None:
        """A good probe after the cooldown: back in rotation."""
        if not replica.healthy:
            log.info("readmitting %s", replica.name)
        replica.healthy = True
        replica.failures = 0


class HealthChecker:
    """Probes every replica periodically and applies the `HealthPolicy`."""

    def __init__(
        self, pool: Pool, policy: HealthPolicy, interval_s: float, timeout_s: float
    ) -> None:
        self._pool = pool
        self._policy = policy
        self._interval = interval_s
        self._timeout = timeout_s
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Run the probe loop in the background."""
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        """Stop probing."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def check_all(self) -> None:
        """Probe every replica that is due, at once."""
        now = asyncio.get_running_loop().time()
        due = [r for r in self._pool.replicas if r.healthy or now >= r.cooldown_until]
        await asyncio.gather(*(self._check(r) for r in due))

    async def _loop(self) -> None:
        while True:
            await self.check_all()
            self._age_latencies()
            await asyncio.sleep(self._interval)

    def _age_latencies(self) -> None:
        # A replica skipped for slowness gets no samples; halving a stale average lets it
        # earn traffic again, so a replica that recovered is not shunned for ever.
        now = asyncio.get_running_loop().time()
        for replica in self._pool.replicas:
            if now - replica.last_sample > self._interval:
                replica.latency_ms /= 2

    async def _check(self, replica: Replica) -> None:
        outcome = await self._probe(replica)
        now = asyncio.get_running_loop().time()
        if outcome is _Probe.OK:
            self._policy.readmit(replica)
        elif not replica.healthy:
            self._policy.eject(replica, now)  # still bad after the cooldown: a longer one
        else:
            # Unreachable is certain; a slow or unhappy answer counts like a failed request.
            self._policy.failed(replica, now, hard=outcome is _Probe.UNREACHABLE)

    async def _probe(self, replica: Replica) -> _Probe:
        try:
            async with asyncio.timeout(self._timeout):
                status, _ = await self._get(replica, "/health")
                wildcard = replica.spec.model == ANY_MODEL
                if status == 404 or (wildcard and not replica.served_models):
                    status, body = await self._get(replica, replica.spec.base_path + "/models")
                    replica.served_models |= _model_ids(body) if status == 200 else set()
        except (ConnectFailed, UpstreamClosed):
            return _Probe.UNREACHABLE
        except (UpstreamError, TimeoutError):
            return _Probe.BAD
        return _Probe.OK if status == 200 else _Probe.BAD

    async def _get(self, replica: Replica, path: str) -> tuple[int, bytes]:
        conn = await replica.conns.connect()
        chunks: list[bytes] = []
        try:
            head = b"GET %s HTTP/1.1\r\n%s\r\n" % (path.encode(), replica.request_prefix)
            conn.send(head, chunks.append)
            status = await conn.wait_head()
            await conn.wait_done()
            return status, b"".join(chunks)
        finally:
            conn.abort()


def _model_ids(body: bytes) -> set[str]:
    try:
        data = orjson.loads(body).get("data", [])
    except (orjson.JSONDecodeError, AttributeError):
        return set()
    return {str(item["id"]) for item in data if isinstance(item, dict) and "id" in item}
