"""The tool worker's Prometheus metrics (served by `taskyard.plumbing.metrics.serve_metrics`): tool
call durations, and the sandboxes read from the provider when scraped."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import REGISTRY, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from taskyard.plumbing.metrics import DURATION_BUCKETS
from taskyard.sandbox import SandboxProvider

__all__ = ["TOOL_CALL_SECONDS", "SandboxCollector", "watch_sandboxes"]

TOOL_CALL_SECONDS = Histogram(
    "taskyard_tool_call_seconds",
    "One tool call on a tool worker, per tool.",
    ["tool", "outcome"],  # ok, error (the tool's own), crashed (the worker's trouble)
    buckets=DURATION_BUCKETS,
)


class SandboxCollector(Collector):
    """The provider's sandboxes as they are when scraped (none before the first call)."""

    def __init__(self, provider: Callable[[], SandboxProvider | None]) -> None:
        self._provider = provider

    def collect(self) -> Iterator[Metric]:
        provider = self._provider()
        if provider is None:
            return
        live = GaugeMetricFamily(
            "taskyard_sandboxes", "Sandboxes of this worker: of sessions, warm.", labels=["state"]
        )
        live.add_metric(["session"], len(provider.sessions()))
        live.add_metric(["warm"], provider.warm)
        yield live
        yield CounterMetricFamily(
            "taskyard_sandbox_starts", "Sandbox kernels started.", value=provider.starts
        )


def watch_sandboxes(provider: Callable[[], SandboxProvider | None]) -> None:
    """Export the sandboxes of the provider `provider()` returns, on the default registry."""
    REGISTRY.register(SandboxCollector(provider))
