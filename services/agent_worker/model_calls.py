"""Each model call of the agent worker, observed: a client span whose context the request
carries to the proxy (`traceparent`, added by the model client from the current context), and
its duration in `taskyard_model_call_seconds`."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing, contextmanager
from typing import Any

from opentelemetry import context, trace

from services.agent_worker.metrics import MODEL_CALL_SECONDS
from shared.llms import AsyncOpenAIChat
from shared.llms.base import ChatMessages, ChatResult
from shared.tracing import job_attributes

__all__ = ["ObservedModel"]

_tracer = trace.get_tracer("taskyard.agent_worker")
_END = object()


class ObservedModel:
    """The `AsyncChatModel` it wraps, each call in a span and timed."""

    def __init__(self, inner: AsyncOpenAIChat) -> None:
        self.inner = inner

    async def chat(
        self,
        messages: ChatMessages,
        *,
        session_id: int | str | None = None,
        tools: list[dict[str, Any]] | None = None,
        **params: Any,
    ) -> ChatResult:
        with self._observed(session_id, params) as call:
            token = context.attach(call)
            try:
                return await self.inner.chat(messages, session_id=session_id, tools=tools, **params)
            finally:
                context.detach(token)

    async def stream_chat(
        self,
        messages: ChatMessages,
        *,
        session_id: int | str | None = None,
        tools: list[dict[str, Any]] | None = None,
        **params: Any,
    ) -> AsyncIterator[ChatResult]:
        with self._observed(session_id, params) as call:
            stream = self.inner.stream_chat(messages, session_id=session_id, tools=tools, **params)
            async with aclosing(stream):
                while (snapshot := await _next(stream, call)) is not _END:
                    yield snapshot

    @contextmanager
    def _observed(self, session_id: int | str | None, params: dict[str, Any]) -> Iterator[Any]:
        """The span's context for the call; the span ends, and the duration is counted, after."""
        model = self.inner.model
        ids = job_attributes(params.get("task_id"), None if session_id is None else str(session_id))
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


async def _next(stream: AsyncIterator[ChatResult], call: Any) -> Any:
    # The call's span is current while the client works (it sends the request on the first
    # read), and only then: the context is never held across the generator's yields.
    token = context.attach(call)
    try:
        return await anext(stream, _END)
    finally:
        context.detach(token)
