"""Prometheus metrics kept as plain counters on the hot path, rendered by prometheus_client
at scrape time through a custom collector (which also escapes the label values).

Why not prometheus_client's metric objects on the hot path: their label lookups and locks cost
microseconds per call; here a request costs a few dictionary increments (one event loop
thread, so no lock is needed) and building the families waits for `/metrics`.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sized

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from services.llm_proxy.replicas.pool import Pool, Replica

__all__ = ["Histogram", "Metrics"]

_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
)
# Go's float format, as Prometheus writes `le`; str() spells these bounds the same way.
_BOUNDS = [*(str(b) for b in _BUCKETS), "+Inf"]


class Histogram:
    """Cumulative-bucket histogram of seconds."""

    def __init__(self) -> None:
        self.counts = [0] * (len(_BUCKETS) + 1)
        self.total = 0.0
        self.count = 0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(_BUCKETS, seconds)] += 1
        self.total += seconds
        self.count += 1

    def buckets(self) -> list[tuple[str, float]]:
        """Cumulative counts per upper bound, as Prometheus wants them."""
        out: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip(_BOUNDS, self.counts, strict=True):
            running += count
            out.append((bound, running))
        return out


class Metrics(Collector):
    """Every counter the proxy exports; gauges are read from the pool when scraped."""

    def __init__(self, pool: Pool, queues: Mapping[str, Sized]) -> None:
        self._pool = pool
        self._queues = queues
        self.requests: defaultdict[tuple[str, int], int] = defaultdict(int)
        self.errors: defaultdict[str, int] = defaultdict(int)
        self.replica_requests: defaultdict[str, int] = defaultdict(int)
        self.replica_failures: defaultdict[str, int] = defaultdict(int)
        self.tokens: defaultdict[tuple[str, str], int] = defaultdict(int)
        # Completion requests per tenant: "admitted" or "rate_limited".
        self.tenant_requests: defaultdict[tuple[str, str], int] = defaultdict(int)
        self.latency: defaultdict[str, Histogram] = defaultdict(Histogram)
        self.redis_syncs = 0
        self.placement_syncs = 0
        self.peers = 0  # other proxy instances whose load counts in routing
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(self)

    def request_done(self, endpoint: str, status: int, seconds: float) -> None:
        """Count one answered request and its duration."""
        self.requests[endpoint, status] += 1
        self.latency[endpoint].observe(seconds)

    def record_usage(self, tenant: str, prompt: int, completion: int) -> None:
        self.tokens[tenant, "prompt"] += prompt
        self.tokens[tenant, "completion"] += completion

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self._registry)

    def collect(self) -> Iterator[Metric]:
        yield _counter(
            "taskyard_proxy_requests", "Requests answered.", ["endpoint", "status"],
            (((endpoint, str(status)), n) for (endpoint, status), n in self.requests.items()),
        )  # fmt: skip
        yield _counter(
            "taskyard_proxy_errors", "Failures by kind.", ["kind"],
            (((kind,), n) for kind, n in self.errors.items()),
        )  # fmt: skip
        latency = HistogramMetricFamily(
            "taskyard_proxy_request_seconds", "Time to answer.", labels=["endpoint"]
        )
        for endpoint, histogram in sorted(self.latency.items()):
            latency.add_metric([endpoint], histogram.buckets(), histogram.total)
        yield latency
        yield _counter(
            "taskyard_proxy_tokens", "Tokens by tenant and kind.", ["tenant", "kind"],
            self.tokens.items(),
        )  # fmt: skip
        yield _counter(
            "taskyard_proxy_tenant_requests", "Completion requests by tenant and outcome.",
            ["tenant", "outcome"], self.tenant_requests.items(),
        )  # fmt: skip
        yield CounterMetricFamily(
            "taskyard_proxy_redis_syncs", "Successful Redis syncs.", value=self.redis_syncs
        )
        yield CounterMetricFamily(
            "taskyard_proxy_placement_syncs",
            "Successful exchanges of placements and load with the other proxy instances.",
            value=self.placement_syncs,
        )
        yield GaugeMetricFamily(
            "taskyard_proxy_peers",
            "Other proxy instances whose placements and load this one routes by.",
            value=self.peers,
        )
        queue = GaugeMetricFamily(
            "taskyard_proxy_queue_length", "Requests waiting for a slot.", labels=["group"]
        )
        for group, waiting in sorted(self._queues.items()):
            queue.add_metric([group], len(waiting))
        yield queue
        yield from self._replica_families()

    def _replica_families(self) -> Iterator[Metric]:
        Family = type[GaugeMetricFamily] | type[CounterMetricFamily]
        families: list[tuple[str, Family, str, Callable[[Replica], float]]] = [
            ("taskyard_proxy_replica_in_flight", GaugeMetricFamily, "Requests in flight.",
             lambda r: r.in_flight),
            ("taskyard_proxy_replica_healthy", GaugeMetricFamily, "1 if in rotation.",
             lambda r: int(r.healthy)),
            ("taskyard_proxy_replica_latency_ms", GaugeMetricFamily,
             "Moving average time to head.", lambda r: r.latency_ms),
            ("taskyard_proxy_replica_requests", CounterMetricFamily, "Exchanges sent.",
             lambda r: self.replica_requests[r.name]),
            ("taskyard_proxy_replica_failures", CounterMetricFamily, "Exchanges failed.",
             lambda r: self.replica_failures[r.name]),
        ]  # fmt: skip
        for name, kind, help_text, read in families:
            family = kind(name, help_text, labels=["replica", "model"])
            for replica in self._pool.replicas:
                family.add_metric([replica.name, replica.spec.model], read(replica))
            yield family


def _counter(
    name: str, help_text: str, labels: list[str], values: Iterable[tuple[tuple[str, ...], int]]
) -> CounterMetricFamily:
    family = CounterMetricFamily(name, help_text, labels=labels)
    for label_values, value in sorted(values):
        family.add_metric(list(label_values), value)
    return family
