"""OpenTelemetry traces: one per task, from the gateway's request through the Celery jobs it
leads to (agent step, tool run, next step) to each model call, the proxy and its upstream.

Off unless `TASKYARD_OTLP_ENDPOINT` is set: then `setup_tracing` exports the process's spans
over OTLP/HTTP and turns on the maintained instrumentations (Celery, redis, httpx; FastAPI per
app). Without it, the OpenTelemetry API stays a no-op: nothing is recorded and `inject` adds
no header. The context crosses processes as W3C `traceparent`: in Celery's message headers
(Celery's instrumentation does it for `send_task`; `taskyard.runtime.jobs` does it for the envelopes
the store's Lua scripts push), in a model request's headers to the proxy, and from the proxy on to
its upstream.
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.celery import CeleryInstrumentor
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.instrumentation.redis import RedisInstrumentor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from taskyard.plumbing.settings import OtlpSettings

__all__ = ["JOB_ATTRIBUTES", "job_attributes", "setup_tracing"]

# The ids every span of a task may carry, as span attributes.
JOB_ATTRIBUTES = ("taskyard.task_id", "taskyard.session_id", "taskyard.tenant", "taskyard.step")


def setup_tracing(
    service: str,
    settings: OtlpSettings,
    *,
    libraries: bool = True,
    exporter: SpanExporter | None = None,
) -> bool:
    """Export this process's spans (to the OTLP endpoint, or to `exporter`) and, with
    `libraries`, instrument Celery, redis and httpx. False, and nothing done, when no endpoint
    is configured."""
    if exporter is None and not settings.otlp_endpoint:
        return False
    if exporter is None:
        exporter = OTLPSpanExporter(endpoint=settings.otlp_endpoint.rstrip("/") + "/v1/traces")
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    if not libraries:
        return True
    for instrumentor in (CeleryInstrumentor(), RedisInstrumentor(), HTTPXClientInstrumentor()):
        if not instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.instrument()
    return True


def job_attributes(
    task_id: str | None,
    session_id: str | None = None,
    tenant: str | None = None,
    step: int | None = None,
) -> Mapping[str, str | int]:
    """A task's ids as span attributes (those given)."""
    values = (task_id, session_id, tenant, step)
    return {k: v for k, v in zip(JOB_ATTRIBUTES, values, strict=True) if v is not None}
