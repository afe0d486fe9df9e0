"""Seeing the stack work, every service a process: one trace per task across all of them (the
gateway's request, the agent step, the tool run, the next agent step, each model call, the
proxy and its upstream call; exported over OTLP/HTTP to a receiver the test holds in memory),
every service's Prometheus metrics, and one JSON log format carrying the job's ids."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest
from e2e_support import wait_status
from otlp_receiver import OTLPReceiver, ReceivedSpan
from prometheus_client.parser import text_string_to_metric_families

from devstack.stack import LocalStack
from taskyard.client import TaskyardClient

pytestmark = pytest.mark.e2e

SERVER, CLIENT, CONSUMER = 2, 3, 5  # OTLP span kinds


@pytest.fixture(scope="module")
def receiver() -> Iterator[OTLPReceiver]:
    with OTLPReceiver() as receiver:
        yield receiver


@pytest.fixture(scope="module")
def two_step_task(stack: LocalStack) -> str:
    """A task of two steps (a tool call, then the answer), run to its end."""
    client = TaskyardClient(stack.gateway_url, stack.api_key)
    task_id = client.submit("What is 6 * 7? Use Python.", session_id="traced")["id"]
    assert wait_status(client, task_id)["status"] == "succeeded"
    client.close()
    return task_id


@pytest.fixture(scope="module")
def stack(sandbox_image: str, receiver: OTLPReceiver) -> Iterator[LocalStack]:
    env = {"TASKYARD_OTLP_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100"}
    stack = LocalStack(sandbox_backend="docker", extra_env=env).start()
    yield stack
    stack.stop()


class Trace:
    """A task's spans, found from the gateway's request that created it."""

    def __init__(self, spans: list[ReceivedSpan], task_id: str) -> None:
        (self.request,) = [
            s for s in spans
            if s.service == "gateway" and s.kind == SERVER
            and s.attributes.get("taskyard.task_id") == task_id
        ]  # fmt: skip
        self.spans = [s for s in spans if s.trace_id == self.request.trace_id]
        self._by_id = {s.span_id: s for s in self.spans}

    def find(self, service: str, kind: int, prefix: str) -> list[ReceivedSpan]:
        return [
            s for s in self.spans
            if s.service == service and s.kind == kind and s.name.startswith(prefix)
        ]  # fmt: skip

    def step(self, number: int) -> ReceivedSpan:
        (span,) = [
            s for s in self.find("agent_worker", CONSUMER, "run/agent.step")
            if s.attributes["taskyard.step"] == number
        ]  # fmt: skip
        return span

    def descends(self, span: ReceivedSpan, ancestor: ReceivedSpan) -> bool:
        while span.parent_id in self._by_id:
            span = self._by_id[span.parent_id]
            if span is ancestor:
                return True
        return False

    def children(self, parent: ReceivedSpan, service: str, kind: int) -> list[ReceivedSpan]:
        return [
            s for s in self.spans
            if s.parent_id == parent.span_id and s.service == service and s.kind == kind
        ]  # fmt: skip


def _trace(receiver: OTLPReceiver, task_id: str, timeout: float = 20) -> Trace:
    """The task's trace once every span expected has arrived (they are exported in batches)."""
    deadline = time.monotonic() + timeout
    while True:
        spans = receiver.received()
        try:
            trace = Trace(spans, task_id)
            trace.step(0), trace.step(1)
            expected = [("tool_worker", CONSUMER, "run/tools.run", 1),
                        ("agent_worker", CLIENT, "chat ", 2), ("llm_proxy", SERVER, "POST", 2),
                        ("llm_proxy", CLIENT, "upstream", 2)]  # fmt: skip
            if all(len(trace.find(*where)) >= n for *where, n in expected):
                return trace
        except ValueError:
            pass
        assert time.monotonic() < deadline, f"the trace stayed incomplete: {spans}"
        time.sleep(0.2)


def test_a_two_step_task_is_one_connected_trace(two_step_task: str, receiver: OTLPReceiver) -> None:
    task_id = two_step_task
    trace = _trace(receiver, task_id)

    first, second = trace.step(0), trace.step(1)
    (tool,) = trace.find("tool_worker", CONSUMER, "run/tools.run")
    assert trace.descends(first, trace.request)  # gateway → first step (the store's envelope)
    assert trace.descends(tool, first)  # first step → tool run (the commit's envelope)
    assert trace.descends(second, tool)  # tool run → next step (the result's envelope)
    calls = trace.find("agent_worker", CLIENT, "chat ")
    for step, later in ((first, tool), (second, None)):
        (model_call,) = [
            c for c in calls
            if trace.descends(c, step) and not (later and trace.descends(c, later))
        ]  # fmt: skip
        (proxied,) = trace.children(model_call, "llm_proxy", SERVER)
        (upstream,) = trace.children(proxied, "llm_proxy", CLIENT)
        assert upstream.attributes["taskyard.outcome"] == "answered"
        assert proxied.attributes["taskyard.task_id"] == task_id
    for span in (first, second, tool):
        assert span.attributes["taskyard.task_id"] == task_id
        assert span.attributes["taskyard.session_id"] == "traced"
        assert span.attributes["taskyard.tenant"] == "demo"
    assert trace.request.attributes["taskyard.session_id"] == "traced"


def _scrape(url: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Sample values by name, then by sorted labels."""
    found: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(httpx.get(url, timeout=5).text):
        for sample in family.samples:
            found.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def test_every_service_serves_its_metrics(stack: LocalStack, two_step_task: str) -> None:
    metrics = {name: _scrape(url) for name, url in stack.metrics_urls.items()}
    gateway, agent, tools = metrics["gateway"], metrics["agent_worker"], metrics["tool_worker"]
    created = (("method", "POST"), ("route", "/v1/tasks"), ("status", "202"))
    assert gateway["taskyard_gateway_requests_total"][created] >= 1
    assert gateway["taskyard_tasks_accepted_total"][(("status", "queued"),)] >= 1
    assert (("queue", "agent"),) in gateway["taskyard_queue_depth"]
    assert agent["taskyard_agent_step_seconds_count"][(("outcome", "done"),)] >= 2
    model_calls = agent["taskyard_model_call_seconds_count"]
    assert model_calls[(("model", "scripted"), ("outcome", "ok"))] >= 2
    assert agent["taskyard_tokens_total"][(("kind", "completion"), ("tenant", "demo"))] > 0
    tool_calls = tools["taskyard_tool_call_seconds_count"]
    assert tool_calls[(("outcome", "ok"), ("tool", "IPythonInterpreter"))] >= 1
    assert tools["taskyard_sandbox_starts_total"][()] >= 2  # the start-up check and a session
    assert tools["taskyard_sandboxes"][(("state", "session"),)] >= 1
    assert metrics["proxy"]["taskyard_proxy_requests_total"]
    assert "process_cpu_seconds_total" in metrics["beat"]


def test_every_service_logs_json_lines_with_the_jobs_ids(
    stack: LocalStack, two_step_task: str
) -> None:
    for name in ("gateway", "proxy", "agent_worker", "tool_worker", "beat"):
        lines = stack.log_path(name).read_text().splitlines()
        records = [json.loads(line) for line in lines if line.startswith("{")]
        assert records and all({"ts", "level", "logger", "msg"} <= r.keys() for r in records)
    tool_log = stack.log_path("tool_worker").read_text().splitlines()
    calls = [json.loads(line) for line in tool_log if two_step_task in line]
    (call,) = [r for r in calls if r["msg"] == "tool call IPythonInterpreter"]
    assert (call["session_id"], call["tenant"], call["step"]) == ("traced", "demo", 0)
    assert call["service"] == "tool_worker" and call["tool"] == "IPythonInterpreter"
