"""The proxy's spans, made by hand (its HTTP server is its own, so no instrumentation knows
it): a server span per completion request, continuing the caller's trace from its
`traceparent`, and a client span per upstream attempt, whose `traceparent` goes to the replica.

With tracing off none of this runs: the request path pays one test of an attribute.
"""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, set_span_in_context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from services.llm_proxy.replicas.pool import Replica
from taskyard.http1 import Request
from taskyard.plumbing.tracing import job_attributes

__all__ = ["server_span", "upstream_span"]

_tracer = trace.get_tracer("taskyard.llm_proxy")
_propagator = TraceContextTextMapPropagator()
_CONTEXT_HEADERS = (b"traceparent", b"tracestate")


def server_span(request: Request, endpoint: str) -> Span:
    """The span of one request, a child of the caller's span when it sent one."""
    headers = request.headers
    carrier = {n.decode(): headers[n].decode("latin-1") for n in _CONTEXT_HEADERS if n in headers}
    task, session = headers.get(b"x-task-id"), headers.get(b"x-session-id")
    ids = job_attributes(
        task.decode("latin-1") if task else None, session.decode("latin-1") if session else None
    )
    return _tracer.start_span(
        f"{request.method.decode()} /v1/{endpoint}",
        context=_propagator.extract(carrier),
        kind=SpanKind.SERVER,
        attributes={"http.route": f"/v1/{endpoint}", **ids},
    )


def upstream_span(parent: Span, replica: Replica) -> tuple[Span, bytes]:
    """A client span for one attempt on `replica`, and the header line that carries it."""
    span = _tracer.start_span(
        f"upstream {replica.name}",
        context=set_span_in_context(parent),
        kind=SpanKind.CLIENT,
        attributes={"server.address": replica.spec.host, "server.port": replica.spec.port},
    )
    carrier: dict[str, str] = {}
    _propagator.inject(carrier, context=set_span_in_context(span))
    return span, b"".join(b"%s: %s\r\n" % (k.encode(), v.encode()) for k, v in carrier.items())
