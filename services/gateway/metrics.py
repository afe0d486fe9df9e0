"""The gateway's Prometheus metrics: requests and their latency per route (an ASGI middleware),
tasks accepted, the queues' depths; rendered at `/metrics`.

uvicorn may run several gateway processes (`--workers`): with `PROMETHEUS_MULTIPROC_DIR` set
(an empty directory per start, as compose mounts), prometheus_client's multiprocess mode adds
up every process's counts, whichever process answers the scrape. With one process, the plain
registry.
"""

from __future__ import annotations

import os
import time

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from taskyard.plumbing.metrics import DURATION_BUCKETS

__all__ = ["QUEUE_DEPTH", "TASKS_ACCEPTED", "RequestMetrics", "render"]

REQUESTS = Counter(
    "taskyard_gateway_requests", "Requests answered, per route.", ["method", "route", "status"]
)
LATENCY = Histogram(
    "taskyard_gateway_request_seconds",
    "Time to answer (a followed event stream: until it ends), per route.",
    ["method", "route"],
    buckets=DURATION_BUCKETS,
)
TASKS_ACCEPTED = Counter(
    "taskyard_tasks_accepted",
    "Tasks submitted, by what became of them: queued (its first step is on the agent queue), "
    "waiting (behind its session's running task), existing (an Idempotency-Key seen before), "
    "rejected (the session was busy).",
    ["status"],
)
QUEUE_DEPTH = Gauge(
    "taskyard_queue_depth",
    "Jobs waiting on a Celery queue, read at scrape time.",
    ["queue"],
    multiprocess_mode="mostrecent",
)


class RequestMetrics:
    """Counts every HTTP request and its duration, labelled by the route's template."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started, status = time.perf_counter(), 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            REQUESTS.labels(scope["method"], route, str(status)).inc()
            LATENCY.labels(scope["method"], route).observe(time.perf_counter() - started)


def render() -> bytes:
    """Every metric of the gateway, of all its processes in multiprocess mode."""
    if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
        return generate_latest(REGISTRY)
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    return generate_latest(registry)
