"""Each model call of the agent worker: whose it is, what it used, and observed.

Every call made during a step (by the agent, any of its sub-agents, or the compaction of
its memory) belongs to the step's task: `open_step_calls` marks the step's asyncio task with
its `StepCalls` (a context variable, so sub-agents need not pass anything down, and steps
running side by side on the loop never mix). Each call then carries a tenant credential for
the task (`taskyard.plumbing.tenant_credentials`) as its bearer credential, so the proxy counts and
limits it as the task's tenant's, and adds its usage to the step's: what the step commits
to the task is every call's tokens, the one record of a task's usage.

Observed: a client span whose context the request carries to the proxy (`traceparent`, added
by the model client from the current context), and its duration in
`taskyard_model_call_seconds`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import aclosing, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from opentelemetry import context, trace

from services.agent_worker.errors import AgentWorkerError
from services.agent_worker.metrics import MODEL_CALL_SECONDS
from taskyard.agentkit.llms import AsyncOpenAIChat
from taskyard.agentkit.llms.base import ChatMessages, ChatResult, UsageSink
from taskyard.plumbing.tenant_credentials import TenantCredentials
from taskyard.plumbing.tracing import job_attributes
from taskyard.runtime.task import TaskRecord

__all__ = ["ModelCallOutsideStep", "ObservedModel", "StepCalls", "open_step_calls"]

_tracer = trace.get_tracer("taskyard.agent_worker")
_END = object()


@dataclass(slots=True)
class StepCalls:
    """The model calls of one step: the task they serve and the tokens they used."""

    tenant: str
    task_id: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0

    def add(self, usage: dict[str, int]) -> None:
        self.prompt_tokens += usage.get("prompt_tokens", 0)
        self.completion_tokens += usage.get("completion_tokens", 0)
        self.calls += 1

    @property
    def usage(self) -> dict[str, int]:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}


_STEP: ContextVar[StepCalls | None] = ContextVar("taskyard_step_calls", default=None)


def open_step_calls(record: TaskRecord) -> StepCalls:
    """Count the model calls of the current asyncio task (one step) for `record`'s task. The
    step runs as a task of its own, so the mark ends with it."""
    calls = StepCalls(record.tenant, record.id)
    _STEP.set(calls)
    return calls


class ModelCallOutsideStep(AgentWorkerError, RuntimeError):
    """A model call in the agent worker that no step owns: no tenant to sign it for."""


class ObservedModel:
    """The `AsyncChatModel` it wraps, each call signed for its step's task, counted into the
    step's usage, in a span and timed. Without `credentials` (no secret set) calls carry the
    client's one API key."""

    def __init__(
        self, inner: AsyncOpenAIChat, credentials: TenantCredentials | None = None
    ) -> None:
        self.inner = inner
        self.credentials = credentials

    async def chat(
        self,
        messages: ChatMessages,
        *,
        session_id: int | str | None = None,
        task_id: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        on_usage: UsageSink | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        top_p: float | None = None,
        stop: list[str] | None = None,
    ) -> ChatResult:
        step = _current_step()  # its task id is the call's, whatever `task_id` says
        with self._observed(session_id, step.task_id) as call:
            token = context.attach(call)
            try:
                return await self.inner.chat(
                    messages, session_id=session_id, task_id=step.task_id, tools=tools,
                    extra_headers=self._headers(step, extra_headers),
                    on_usage=_counted(step, on_usage), temperature=temperature,
                    max_tokens=max_tokens, top_p=top_p, stop=stop,
                )  # fmt: skip
            finally:
                context.detach(token)

    async def stream_chat(
        self,
        messages: ChatMessages,
        *,
        session_id: int | str | None = None,
        task_id: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        on_usage: UsageSink | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        top_p: float | None = None,
        stop: list[str] | None = None,
    ) -> AsyncIterator[ChatResult]:
        step = _current_step()
        with self._observed(session_id, step.task_id) as call:
            stream = self.inner.stream_chat(
                messages, session_id=session_id, task_id=step.task_id, tools=tools,
                extra_headers=self._headers(step, extra_headers),
                on_usage=_counted(step, on_usage), temperature=temperature,
                max_tokens=max_tokens, top_p=top_p, stop=stop,
            )  # fmt: skip
            async with aclosing(stream):
                while (snapshot := await _next(stream, call)) is not _END:
                    yield snapshot

    def _headers(
        self, step: StepCalls, extra_headers: Mapping[str, str] | None
    ) -> Mapping[str, str] | None:
        # The task's credential wins over the caller's: the proxy counts the call by it.
        if self.credentials is None:
            return extra_headers
        bearer = f"Bearer {self.credentials.sign(step.tenant, step.task_id)}"
        return {**(extra_headers or {}), "Authorization": bearer}

    @contextmanager
    def _observed(self, session_id: int | str | None, task_id: str) -> Iterator[Any]:
        """The span's context for the call; the span ends, and the duration is counted, after."""
        model = self.inner.model
        ids = job_attributes(task_id, None if session_id is None else str(session_id))
        span = _tracer.start_span(
            f"chat {model}",
            kind=trace.SpanKind.CLIENT,
            attributes={"gen_ai.request.model": model, **ids},
        )
        started, outcome = time.perf_counter(), "error"
        try:
            yield trace.set_span_in_context(span)
            outcome = "ok"
        except Exception as exc:
            span.record_exception(exc)
            span.set_status(trace.StatusCode.ERROR, str(exc))
            raise
        finally:
            span.end()
            MODEL_CALL_SECONDS.labels(model, outcome).observe(time.perf_counter() - started)


def _counted(step: StepCalls, on_usage: UsageSink | None) -> UsageSink:
    """The step's usage sink, and the caller's too where it gave one."""
    if on_usage is None:
        return step.add

    def both(usage: dict[str, int]) -> None:
        step.add(usage)
        on_usage(usage)

    return both


def _current_step() -> StepCalls:
    step = _STEP.get()
    if step is None:
        raise ModelCallOutsideStep(
            "a model call outside an agent step: its tenant is unknown, so it is not sent"
        )
    return step


async def _next(stream: AsyncIterator[ChatResult], call: Any) -> Any:
    # The call's span is current while the client works (it sends the request on the first
    # read), and only then: the context is never held across the generator's yields.
    token = context.attach(call)
    try:
        return await anext(stream, _END)
    finally:
        context.detach(token)
