"""Prometheus metrics kept as plain counters and rendered in the text format at scrape time.

Why not prometheus_client's objects on the hot path: label lookups and locks cost microseconds
per call; here a request costs a few dictionary increments and the formatting waits for
`/metrics`.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Mapping, Sized

from services.llm_proxy.pool import Pool

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

    def lines(self, name: str, labels: str) -> list[str]:
        out, running = [], 0
        sep = "," if labels else ""
        for bound, count in zip((*_BUCKETS, float("inf")), self.counts, strict=True):
            running += count
            le = "+Inf" if bound == float("inf") else repr(bound)
            out.append(f'{name}_bucket{{{labels}{sep}le="{le}"}} {running}')
        out.append(f"{name}_sum{{{labels}}} {self.total}")
        out.append(f"{name}_count{{{labels}}} {self.count}")
        return out


class Metrics:
    """Every counter the proxy exports; gauges are read from the pool when scraped."""

    def __init__(self, pool: Pool, queues: Mapping[str, Sized]) -> None:
        self._pool = pool
        self._queues = queues
        self.requests: defaultdict[tuple[str, int], int] = defaultdict(int)
        self.errors: defaultdict[str, int] = defaultdict(int)
        self.replica_requests: defaultdict[str, int] = defaultdict(int)
        self.replica_failures: defaultdict[str, int] = defaultdict(int)
        self.tokens: defaultdict[tuple[str, str], int] = defaultdict(int)
        self.latency: defaultdict[str, Histogram] = defaultdict(Histogram)
        self.redis_syncs = 0

    def request_done(self, endpoint: str, status: int, seconds: float) -> None:
        """Count one answered request and its duration."""
        self.requests[endpoint, status] += 1
        self.latency[endpoint].observe(seconds)

    def count_tokens(self, tenant: str, prompt: int, completion: int) -> None:
        self.tokens[tenant, "prompt"] += prompt
        self.tokens[tenant, "completion"] += completion

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        lines: list[str] = []
        _family(lines, "taskyard_proxy_requests_total", "counter", "Requests answered.")
        for (endpoint, status), value in sorted(self.requests.items()):
            lines.append(
                f'taskyard_proxy_requests_total{{endpoint="{endpoint}",status="{status}"}} {value}'
            )
        _family(lines, "taskyard_proxy_errors_total", "counter", "Failures by kind.")
        for kind, value in sorted(self.errors.items()):
            lines.append(f'taskyard_proxy_errors_total{{kind="{kind}"}} {value}')
        _family(lines, "taskyard_proxy_request_seconds", "histogram", "Time to answer.")
        for endpoint, histogram in sorted(self.latency.items()):
            labels = f'endpoint="{endpoint}"'
            lines.extend(histogram.lines("taskyard_proxy_request_seconds", labels))
        _family(lines, "taskyard_proxy_tokens_total", "counter", "Tokens by tenant and kind.")
        for (tenant, kind), value in sorted(self.tokens.items()):
            lines.append(f'taskyard_proxy_tokens_total{{tenant="{tenant}",kind="{kind}"}} {value}')
        _family(lines, "taskyard_proxy_redis_syncs_total", "counter", "Successful Redis syncs.")
        lines.append(f"taskyard_proxy_redis_syncs_total {self.redis_syncs}")
        _family(lines, "taskyard_proxy_queue_length", "gauge", "Requests waiting for a slot.")
        for group, queue in sorted(self._queues.items()):
            lines.append(f'taskyard_proxy_queue_length{{group="{group}"}} {len(queue)}')
        self._replica_lines(lines)
        return ("\n".join(lines) + "\n").encode()

    def _replica_lines(self, lines: list[str]) -> None:
        families = [
            (
                "taskyard_proxy_replica_in_flight",
                "gauge",
                "Requests in flight.",
                lambda r: r.in_flight,
            ),
            (
                "taskyard_proxy_replica_healthy",
                "gauge",
                "1 if in rotation.",
                lambda r: int(r.healthy),
            ),
            (
                "taskyard_proxy_replica_latency_ms",
                "gauge",
                "Moving average time to head.",
                lambda r: r.latency_ms,
            ),
            (
                "taskyard_proxy_replica_requests_total",
                "counter",
                "Exchanges sent.",
                lambda r: self.replica_requests[r.name],
            ),
            (
                "taskyard_proxy_replica_failures_total",
                "counter",
                "Exchanges failed.",
                lambda r: self.replica_failures[r.name],
            ),
        ]
        for name, kind, help_text, read in families:
            _family(lines, name, kind, help_text)
            for replica in self._pool.replicas:
                labels = f'replica="{replica.name}",model="{replica.spec.model}"'
                lines.append(f"{name}{{{labels}}} {read(replica)}")


def _family(lines: list[str], name: str, kind: str, help_text: str) -> None:
    lines.append(f"# HELP {name} {help_text}")
    lines.append(f"# TYPE {name} {kind}")
