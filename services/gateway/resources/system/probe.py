"""The system around the gateway, as the dashboard and `/metrics` show it: the queues' depths
(read from the broker), the workers that answer a ping (Celery's remote control, as Flower
asks), and the LLM proxy's replicas (read from the proxy's own `/metrics`)."""

from __future__ import annotations

import asyncio

import httpx
import redis.asyncio as aioredis
from celery import Celery
from prometheus_client.parser import text_string_to_metric_families

from services.gateway.resources.system.models import QueueDepth, ReplicaState, SystemView
from taskyard.agentkit.actions import action_queue, tool_names
from taskyard.plumbing import keys

__all__ = ["SystemProbe", "queue_names"]

_PING_S = 0.5  # how long workers have to answer a ping
_REPLICA_FAMILIES = {
    "taskyard_proxy_replica_healthy": "healthy",
    "taskyard_proxy_replica_in_flight": "in_flight",
    "taskyard_proxy_replica_latency_ms": "latency_ms",
}


def queue_names() -> list[str]:
    """The agent queue and one queue per registered tool."""
    return sorted({keys.AGENT_QUEUE, *(action_queue(name) for name in tool_names())})


class SystemProbe:
    """Reads the system's state on demand; `close` releases its connections."""

    def __init__(self, broker: aioredis.Redis, celery: Celery, proxy_url: str) -> None:
        self.broker = broker  # a client on the broker's database
        self.celery = celery
        self.proxy_metrics = proxy_url.rstrip("/").removesuffix("/v1") + "/metrics"
        self.http = httpx.AsyncClient(timeout=2.0)

    async def view(self) -> SystemView:
        queues, workers, replicas = await asyncio.gather(
            self.queues(), self.workers(), self.replicas()
        )
        return SystemView(queues=queues, workers=workers, replicas=replicas)

    async def queues(self) -> list[QueueDepth]:
        names = queue_names()
        async with self.broker.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.llen(name)
            depths = await pipe.execute()
        return [QueueDepth(name=n, depth=d) for n, d in zip(names, depths, strict=True)]

    async def workers(self) -> list[str]:
        replies = await asyncio.to_thread(self.celery.control.ping, timeout=_PING_S)
        return sorted(name for reply in replies or [] for name in reply)

    async def replicas(self) -> list[ReplicaState]:
        try:
            text = (await self.http.get(self.proxy_metrics)).raise_for_status().text
        except httpx.HTTPError:
            return []  # the proxy is down: no replica is known to serve
        found: dict[tuple[str, str], dict[str, float]] = {}
        for family in text_string_to_metric_families(text):
            if (field := _REPLICA_FAMILIES.get(family.name)) is None:
                continue
            for sample in family.samples:
                key = (sample.labels["replica"], sample.labels["model"])
                found.setdefault(key, {})[field] = sample.value
        return [
            ReplicaState(name=name, model=model, healthy=bool(v.get("healthy")),
                         in_flight=int(v.get("in_flight", 0)), latency_ms=v.get("latency_ms", 0))
            for (name, model), v in sorted(found.items())
        ]  # fmt: skip

    async def close(self) -> None:
        await self.http.aclose()
        await self.broker.aclose()
