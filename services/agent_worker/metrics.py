"""The agent worker's Prometheus metrics (served by `taskyard.plumbing.metrics.serve_metrics`)."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import Counter, Histogram

from taskyard.plumbing.metrics import DURATION_BUCKETS

__all__ = ["MODEL_CALL_SECONDS", "STEP_SECONDS", "TOKENS", "record_usage"]

STEP_SECONDS = Histogram(
    "taskyard_agent_step_seconds",
    "One agent step job, from its start to the jobs it sends.",
    ["outcome"],  # done, retry, failed
    buckets=DURATION_BUCKETS,
)
MODEL_CALL_SECONDS = Histogram(
    "taskyard_model_call_seconds",
    "One model call, from the request to the last streamed token.",
    ["model", "outcome"],  # ok, error
    buckets=DURATION_BUCKETS,
)
TOKENS = Counter(
    "taskyard_tokens", "Model tokens of committed steps, per tenant.", ["tenant", "kind"]
)


def record_usage(tenant: str, usage: Mapping[str, int]) -> None:
    """Count a committed step's usage for its tenant."""
    for kind in ("prompt", "completion"):
        TOKENS.labels(tenant, kind).inc(usage.get(f"{kind}_tokens", 0))
