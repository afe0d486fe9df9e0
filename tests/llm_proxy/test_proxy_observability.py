"""The proxy's metrics through prometheus_client (labels escaped), and its hand-made spans:
a server span continuing the caller's trace, a client span per upstream attempt."""

from __future__ import annotations

from types import SimpleNamespace

import httpx
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client.parser import text_string_to_metric_families
from proxy_support import API_KEY, ReplicaFactory

from services.llm_proxy.accounting.metrics import Metrics
from services.llm_proxy.app import ProxyApp
from services.llm_proxy.settings import ProxySettings

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_ID = "b7ad6b7169203331"


def test_label_values_are_escaped() -> None:
    replica = SimpleNamespace(
        name='r"0\\', spec=SimpleNamespace(model="m"), in_flight=2, healthy=True, latency_ms=1.5
    )
    metrics = Metrics(SimpleNamespace(replicas=[replica]), {})  # type: ignore[arg-type]
    tenant = 'a "tenant"\\with\na newline'
    metrics.record_usage(tenant, 3, 4)
    metrics.request_done("chat", 200, 0.004)
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(metrics.render().decode())
        for s in family.samples
    }
    assert samples["taskyard_proxy_tokens_total", (("kind", "prompt"), ("tenant", tenant))] == 3
    in_flight = ("taskyard_proxy_replica_in_flight", (("model", "m"), ("replica", 'r"0\\')))
    assert samples[in_flight] == 2
    bucket = (("endpoint", "chat"), ("le", "0.005"))
    assert samples["taskyard_proxy_request_seconds_bucket", bucket] == 1


async def test_a_request_continues_the_callers_trace(
    replicas: ReplicaFactory, spans: InMemorySpanExporter
) -> None:
    (replica,) = replicas(1)
    caller = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01", "X-Task-ID": "task_1",
              "X-Session-ID": "s1"}  # fmt: skip
    assert await _chat_once(replica.url, caller, tracing=True) == 200
    (upstream,) = [s for s in spans.get_finished_spans() if s.kind == SpanKind.CLIENT]
    (server,) = [s for s in spans.get_finished_spans() if s.kind == SpanKind.SERVER]
    assert f"{server.context.trace_id:032x}" == TRACE_ID
    assert f"{server.parent.span_id:016x}" == PARENT_ID
    assert server.attributes["taskyard.task_id"] == "task_1"
    assert server.attributes["http.response.status_code"] == 200
    assert upstream.parent.span_id == server.context.span_id
    assert upstream.attributes["taskyard.outcome"] == "answered"


async def test_without_tracing_no_span_is_made(
    replicas: ReplicaFactory, spans: InMemorySpanExporter
) -> None:
    (replica,) = replicas(1)
    assert await _chat_once(replica.url, {}, tracing=False) == 200
    assert spans.get_finished_spans() == ()


async def _chat_once(upstream: str, headers: dict[str, str], tracing: bool) -> int:
    """One chat call through a proxy in front of `upstream`, started and stopped for it; the
    status it answered."""
    settings = ProxySettings(proxy_upstreams=upstream, llm_api_key=API_KEY, proxy_redis_sync=False)
    app = ProxyApp(settings, tracing=tracing)
    port = await app.start(port=0)
    body = {"model": "scripted", "messages": [{"role": "user", "content": "hi"}]}
    try:
        async with httpx.AsyncClient() as client:
            url = f"http://127.0.0.1:{port}/v1/chat/completions"
            auth = {"Authorization": f"Bearer {API_KEY}"}
            return (await client.post(url, json=body, headers={**auth, **headers})).status_code
    finally:
        await app.stop()
