"""Job payloads and envelopes: an envelope is exactly what Celery and kombu would put on the
broker for the job, and a real Celery worker runs it."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import pytest
import redis
from celery import Celery
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from shared.jobs import AgentStepJob, ToolRunJob, enqueue, envelope
from shared.schema import ToolCall

STEP = AgentStepJob(task_id="task_1", step=2, tenant="t", session_id="s")
SEARCH = ToolCall(id="c1", name="WebBrowser.search", parameters={"query": "x"})
CALL = ToolRunJob(task_id="task_1", step=2, tenant="t", session_id="s", call=SEARCH)


@pytest.fixture
def celery(redis_server: str) -> Iterator[Celery]:
    broker = redis.Redis.from_url(f"{redis_server}/1")
    broker.flushdb()
    app = Celery("jobs-test", broker=f"{redis_server}/1")
    yield app
    broker.close()


def _strip_ids(message: dict) -> dict:
    """A broker message without what differs per send (ids, origin), its body decoded."""
    message = json.loads(json.dumps(message))
    message["body"] = json.loads(base64.b64decode(message["body"]))
    for name in ("id", "root_id", "origin"):
        message["headers"].pop(name)
    # send_task also copies its options (argsrepr, kwargsrepr) into the properties, unread.
    for name in ("correlation_id", "delivery_tag", "reply_to", "argsrepr", "kwargsrepr"):
        message["properties"].pop(name, None)
    return message


@pytest.mark.parametrize("job", [STEP, CALL])
def test_an_envelope_is_what_kombu_puts_on_the_broker(
    celery: Celery, redis_server: str, job: AgentStepJob | ToolRunJob
) -> None:
    enqueue(celery, job)
    sealed = envelope(celery, job)
    broker = redis.Redis.from_url(f"{redis_server}/1")
    [sent] = broker.lrange(sealed.queue, 0, -1)  # kombu's own, on the queue the envelope names
    ours = json.loads(sealed.message)
    assert _strip_ids(ours) == _strip_ids(json.loads(sent))
    assert ours["headers"]["id"] == ours["properties"]["correlation_id"]
    assert ours["headers"]["argsrepr"].startswith("task_1 step 2")


def test_tool_jobs_go_to_their_tools_queue(celery: Celery) -> None:
    assert envelope(celery, CALL).queue == "tools.WebBrowser"
    assert envelope(celery, STEP).queue == "agent"


def test_an_envelope_carries_the_current_trace(celery: Celery, spans: InMemorySpanExporter) -> None:
    # No Celery signal fires for an envelope: the trace context is stamped by `envelope`.
    assert "traceparent" not in json.loads(envelope(celery, STEP).message)["headers"]
    with trace.get_tracer("test").start_as_current_span("commit") as span:
        headers = json.loads(envelope(celery, STEP).message)["headers"]
    context = span.get_span_context()
    _, trace_id, span_id, _ = headers["traceparent"].split("-")
    assert (trace_id, span_id) == (f"{context.trace_id:032x}", f"{context.span_id:016x}")
