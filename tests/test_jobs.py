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

from taskyard.agentkit.schema import ToolCall
from taskyard.agentkit.spec import AgentSpec
from taskyard.runtime.jobs import (
    AgentStepJob,
    McpListJob,
    ToolRunJob,
    enqueue,
    envelope,
    job_for_call,
)
from taskyard.runtime.task import TaskRecord

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


MCP_SPEC = AgentSpec.model_validate({"mcp_servers": [
    {"name": "weather", "url": "https://mcp.example.com/mcp"},
    {"name": "files", "command": ["python3", "server.py"]},
]})  # fmt: skip


def _mcp_call(name: str) -> ToolRunJob:
    call = ToolCall(id="c2", name=name, parameters={})
    job = job_for_call("task_1", 2, "t", "s", call, MCP_SPEC)
    assert isinstance(job, ToolRunJob)
    return job


def test_mcp_calls_carry_their_server_and_go_where_it_is_reached(celery: Celery) -> None:
    remote, local = _mcp_call("weather.forecast"), _mcp_call("files.wordcount")
    assert remote.mcp == MCP_SPEC.mcp_servers[0] and local.mcp == MCP_SPEC.mcp_servers[1]
    # A remote server's calls on the MCP pool, any worker; a local one's in the session's
    # sandbox, so with the interpreter and bound to the worker holding it.
    assert (envelope(celery, remote).queue, envelope(celery, remote).sticky) == ("tools.mcp", "")
    assert (envelope(celery, local).queue, envelope(celery, local).sticky) == (
        "tools.IPythonInterpreter", "t:s",
    )  # fmt: skip
    # A name of no server of the spec is an action's call, as before.
    assert _mcp_call("WebBrowser.search").mcp is None


def test_mcp_listings_go_where_a_call_of_the_server_would(celery: Celery) -> None:
    for server, queue, sticky in zip(
        MCP_SPEC.mcp_servers, ("tools.mcp", "tools.IPythonInterpreter"), ("", "t:s"), strict=True
    ):
        job = McpListJob(tenant="t", session_id="s", server=server, expires_at=0)
        sealed = envelope(celery, job)
        assert (sealed.queue, sealed.sticky) == (queue, sticky)
        assert json.loads(sealed.message)["headers"]["task"] == "tools.mcp_list"


def test_an_envelope_carries_the_current_trace(celery: Celery, spans: InMemorySpanExporter) -> None:
    # No Celery signal fires for an envelope: the trace context is stamped by `envelope`.
    assert "traceparent" not in json.loads(envelope(celery, STEP).message)["headers"]
    with trace.get_tracer("test").start_as_current_span("commit") as span:
        headers = json.loads(envelope(celery, STEP).message)["headers"]
    context = span.get_span_context()
    _, trace_id, span_id, _ = headers["traceparent"].split("-")
    assert (trace_id, span_id) == (f"{context.trace_id:032x}", f"{context.span_id:016x}")


def test_a_step_job_says_why_it_is_sent() -> None:
    """One constructor per cause: the session and tenant always come from the task."""
    record = TaskRecord(tenant="t", session_id="s", input="hi", step=3)
    first = AgentStepJob.first(record)
    assert (first.task_id, first.step, first.tenant, first.session_id) == (record.id, 0, "t", "s")
    again = AgentStepJob.again(record)
    assert (again.task_id, again.step) == (record.id, 3)
    following = AgentStepJob.next_in_session(record, "task_next")
    assert (following.task_id, following.step, following.session_id) == ("task_next", 0, "s")
    after = AgentStepJob.after_tools(CALL)
    assert (after.task_id, after.step, after.tenant, after.session_id) == ("task_1", 3, "t", "s")
