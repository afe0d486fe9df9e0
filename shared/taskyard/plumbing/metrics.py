"""Prometheus metrics for the processes without an HTTP server of their own: the Celery
workers and beat serve prometheus_client's default registry on a small server of their own
(`TASKYARD_METRICS_HOST`, `TASKYARD_METRICS_PORT`).

Why the plain registry is right there: taskyard's workers run Celery's gevent pool (agent)
and threads pool (tools), so a worker is one process and its registry sees every job. A
prefork pool would need prometheus_client's multiprocess mode; the gateway, which runs several
uvicorn processes, uses that mode (see `services.gateway.metrics`).
"""

from __future__ import annotations

from prometheus_client import start_http_server

from taskyard.plumbing.settings import MetricsSettings

__all__ = ["DURATION_BUCKETS", "serve_metrics"]

# Seconds, from a fast tool call to a long model answer.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


def serve_metrics(settings: MetricsSettings) -> int | None:
    """Serve the process's metrics on the configured address; the port, or None when off."""
    if not settings.metrics_port:
        return None
    server, _ = start_http_server(settings.metrics_port, settings.metrics_host)
    return server.server_port
