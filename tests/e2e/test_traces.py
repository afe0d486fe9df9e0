"""One trace per task, across every process: the gateway's request, the agent step, the tool
run, the next agent step, each model call, the proxy and its upstream call. The services
export over OTLP/HTTP to a receiver the test holds in memory."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from e2e_support import wait_status
from otlp_receiver import OTLPReceiver, ReceivedSpan

from services.stack import LocalStack
from shared.client import TaskyardClient

pytestmark = pytest.mark.e2e

SERVER, CLIENT, CONSUMER = 2, 3, 5  # OTLP span kinds


@pytest.fixture(scope="module")
def receiver() -> Iterator[OTLPReceiver]:
    with OTLPReceiver() as receiver:
        yield receiver


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
            trace.step(1)
            if len(trace.find("llm_proxy", CLIENT, "upstream")) >= 2:
                return trace
        except ValueError:
            pass
        assert time.monotonic() < deadline, f"the trace stayed incomplete: {spans}"
        time.sleep(0.2)


def test_a_two_step_task_is_one_connected_trace(stack: LocalStack, receiver: OTLPReceiver) -> None:
    client = TaskyardClient(stack.gateway_url, stack.api_key)
    task_id = client.submit("What is 6 * 7? Use Python.", session_id="traced")["id"]
    assert wait_status(client, task_id)["status"] == "succeeded"
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
