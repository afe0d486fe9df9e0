"""Each model call of the agent worker: a client span, a child of the step's, whose context
the request carries to the model server as `traceparent`; its duration counted; signed for
its step's task with a tenant token; its usage added to the step's, streamed or not, by the
agent or any sub-agent (a caller's own headers and usage sink going along); and no call
without a step."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client import REGISTRY

from services.agent_worker.model_calls import ModelCallOutsideStep, ObservedModel, open_step_calls
from taskyard.agentkit.agents import AsyncAgent, AsyncSequential
from taskyard.agentkit.llms import AsyncOpenAIChat
from taskyard.plumbing.tenant_credentials import TenantClaim, TenantCredentials
from taskyard.runtime.task import TaskRecord

CHUNK = (
    b'data: {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m", '
    b'"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}\n\n'
    b'data: {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m", '
    b'"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 2}}\n\n'
    b"data: [DONE]\n\n"
)
WHOLE = {
    "id": "c", "object": "chat.completion", "created": 0, "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                 "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 3},
}  # fmt: skip
CREDENTIALS = TenantCredentials("0123456789abcdef" * 3)


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []

    async def complete(request: web.Request) -> web.StreamResponse:
        seen.append(dict(request.headers))
        if not (await request.json()).get("stream"):
            return web.json_response(WHOLE)
        reply = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await reply.prepare(request)
        await reply.write(CHUNK)
        return reply

    app = web.Application()
    app.router.add_post("/v1/chat/completions", complete)
    async with TestServer(app, host="127.0.0.1") as test_server:
        yield str(test_server.make_url("/v1")), seen


def _calls() -> float:
    labels = {"model": "m", "outcome": "ok"}
    return REGISTRY.get_sample_value("taskyard_model_call_seconds_count", labels) or 0


async def test_a_call_is_a_child_span_and_its_context_goes_with_the_request(
    server: tuple[str, list[dict[str, str]]], spans: InMemorySpanExporter
) -> None:
    url, seen = server
    before = _calls()
    open_step_calls(TaskRecord(id="t1", tenant="acme", session_id="s1", input="x"))
    async with aiohttp.ClientSession() as session:
        model = ObservedModel(AsyncOpenAIChat(url, "m", session=session))
        with trace.get_tracer("test").start_as_current_span("step") as step:
            snapshots = [s async for s in model.stream_chat([], session_id="s1", task_id="t1")]
    assert snapshots[-1] == "hi"
    (call,) = [s for s in spans.get_finished_spans() if s.kind == SpanKind.CLIENT]
    assert call.parent.span_id == step.get_span_context().span_id
    assert call.attributes["taskyard.task_id"] == "t1"
    assert call.attributes["taskyard.session_id"] == "s1"
    trace_id, span_id = f"{call.context.trace_id:032x}", f"{call.context.span_id:016x}"
    flags = f"{call.context.trace_flags:02x}"
    assert seen[0]["traceparent"] == f"00-{trace_id}-{span_id}-{flags}"
    assert _calls() == before + 1


async def test_every_call_of_a_step_is_signed_for_its_task_and_counted(
    server: tuple[str, list[dict[str, str]]],
) -> None:
    url, seen = server
    spent = open_step_calls(TaskRecord(id="task_9", tenant="acme", session_id="s", input="x"))
    async with aiohttp.ClientSession() as session:
        llm = ObservedModel(AsyncOpenAIChat(url, "m", session=session), CREDENTIALS)
        # Two sub-agents, plain text answers (no usage in their replies), one without task_id.
        pipeline = AsyncSequential(AsyncAgent(llm, name="a"), AsyncAgent(llm, name="b"))
        await pipeline("hello", session_id="s", task_id="task_9")
        await llm.chat([{"role": "user", "content": "summary"}], session_id="s")
        assert [s async for s in llm.stream_chat([], session_id="s")][-1] == "hi"
    assert (spent.calls, spent.usage) == (4, {"prompt_tokens": 22, "completion_tokens": 11})
    for headers in seen:
        token = headers["Authorization"].removeprefix("Bearer ")
        assert CREDENTIALS.verify(token) == TenantClaim(
            "acme", "task_9", CREDENTIALS.verify(token).expires_at
        )
        assert headers["X-Task-ID"] == "task_9"


async def test_a_callers_headers_and_usage_sink_go_along_under_the_tasks_own(
    server: tuple[str, list[dict[str, str]]],
) -> None:
    url, seen = server
    spent = open_step_calls(TaskRecord(id="task_9", tenant="acme", session_id="s", input="x"))
    told: list[dict[str, int]] = []
    mine = {"Authorization": "Bearer mine", "X-Note": "n"}
    async with aiohttp.ClientSession() as session:
        llm = ObservedModel(AsyncOpenAIChat(url, "m", session=session), CREDENTIALS)
        await llm.chat([], task_id="other", extra_headers=mine, on_usage=told.append)
    assert told == [{"prompt_tokens": 5, "completion_tokens": 3}] == [spent.usage]
    assert (seen[0]["X-Note"], seen[0]["X-Task-ID"]) == ("n", "task_9")
    token = seen[0]["Authorization"].removeprefix("Bearer ")
    assert CREDENTIALS.verify(token).task_id == "task_9"  # the step's credential, not the caller's


async def test_a_call_outside_a_step_is_not_sent(server: tuple[str, list[dict[str, str]]]) -> None:
    url, seen = server
    async with aiohttp.ClientSession() as session:
        llm = ObservedModel(AsyncOpenAIChat(url, "m", session=session), CREDENTIALS)
        with pytest.raises(ModelCallOutsideStep):
            await llm.chat([], session_id="s")
    assert seen == []
