"""The OpenAI wire format, once for both clients: request bodies and headers, completions
(whole or streamed as server-sent events) turned into text or an `LLMResponse`, and error
bodies. Plain dicts and JSON, no I/O here."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson

from taskyard.agentkit.llms.base import ChatMessages, ChatResult
from taskyard.agentkit.llms.errors import LLMError
from taskyard.agentkit.schema import LLMResponse, ToolCall
from taskyard.agentkit.text import replace_lone_surrogates

__all__ = [
    "DONE",
    "SSEDecoder",
    "StreamAccumulator",
    "error_from_response",
    "loads",
    "request_body",
    "request_headers",
    "to_result",
    "usage_of",
]

DONE = "[DONE]"  # the data of the last event of an OpenAI stream


def _trace_propagator() -> Callable[[dict[str, str]], None]:
    # OpenTelemetry comes with the `service` extra; the agent library alone sends no context.
    try:
        from opentelemetry.propagate import inject
    except ImportError:
        return lambda headers: None
    return inject


_inject = _trace_propagator()


def request_headers(
    api_key: str, session_id: int | str | None, task_id: str | None
) -> dict[str, str]:
    """Auth, JSON, ``X-Session-ID`` (routing affinity) / ``X-Task-ID`` (the task served), and
    the current trace context (``traceparent``, when tracing is on and a span is current)."""
    headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
    if session_id is not None:
        headers["X-Session-ID"] = str(session_id)
    if task_id is not None:
        headers["X-Task-ID"] = str(task_id)
    _inject(headers)
    return headers


def request_body(
    model: str,
    messages: ChatMessages,
    *,
    tools: list[dict[str, Any]] | None,
    params: dict[str, Any],
    stream: bool,
) -> bytes:
    """The ``/chat/completions`` body, encoded: built as is, with no per-message transform,
    since that would cost more than the rest of a step once a session's history is long."""
    body: dict[str, Any] = {"model": model, "messages": messages, **params}
    if tools:  # an empty ``tools`` list is rejected by OpenAI-compatible servers
        body["tools"] = tools
    if stream:
        body.update(stream=True, stream_options={"include_usage": True})
    return orjson.dumps(body)


def loads(data: bytes | str) -> Any:
    """A model server's JSON. orjson refuses lone surrogates (a server may split a character's
    UTF-16 halves between stream chunks): those become U+FFFD instead of failing the step."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return replace_lone_surrogates(json.loads(data))


def to_result(completion: dict[str, Any], with_tools: bool) -> ChatResult:
    """The first choice as text, or as an `LLMResponse` when tools were offered."""
    choices = completion.get("choices") or []
    if not choices:
        raise LLMError("model answer had no choices")
    message = choices[0].get("message") or {}
    calls = [
        ToolCall(
            id=c.get("id", ""),
            name=c["function"]["name"],
            parameters=c["function"].get("arguments") or "",
        )
        for c in message.get("tool_calls") or []
        if c.get("type", "function") == "function"
    ]
    response = LLMResponse(
        text=message.get("content") or "",
        tool_calls=calls,
        finish_reason=choices[0].get("finish_reason"),
        usage=_usage(completion.get("usage")),
    )
    return response if with_tools else response.text


def usage_of(completion: dict[str, Any]) -> dict[str, int]:
    """A whole completion's token usage (empty when the server reported none)."""
    return _usage(completion.get("usage"))


class StreamAccumulator:
    """Folds streamed chunks into the turn so far (text, tool calls by index, usage)."""

    def __init__(self) -> None:
        self.text = ""
        self.finish_reason: str | None = None
        self.usage: dict[str, int] = {}
        self._calls: dict[int, dict[str, str]] = {}

    def add(self, chunk: dict[str, Any]) -> bool:
        """Take one chunk; True if the text grew."""
        if "error" in chunk:
            raise LLMError(f"model stream failed: {_message(chunk)}", status_code=502)
        if chunk.get("usage"):
            self.usage = _usage(chunk["usage"])
        choices = chunk.get("choices") or []
        if not choices:
            return False
        choice = choices[0]
        self.finish_reason = choice.get("finish_reason") or self.finish_reason
        delta = choice.get("delta") or {}
        for call in delta.get("tool_calls") or []:
            self._add_call(call)
        content = delta.get("content") or ""
        self.text += content
        return bool(content)

    def result(self, with_tools: bool) -> ChatResult:
        """The turn so far, shaped as `to_result` shapes a whole completion."""
        if not with_tools:
            return self.text
        calls = [
            ToolCall(id=c["id"], name=c["name"], parameters=c["arguments"])
            for _, c in sorted(self._calls.items())
        ]
        return LLMResponse(
            text=self.text, tool_calls=calls, finish_reason=self.finish_reason, usage=self.usage
        )

    def _add_call(self, delta: dict[str, Any]) -> None:
        empty = {"id": "", "name": "", "arguments": ""}
        slot = self._calls.setdefault(delta.get("index", 0), empty)
        slot["id"] = delta.get("id") or slot["id"]
        function = delta.get("function") or {}
        slot["name"] = function.get("name") or slot["name"]
        slot["arguments"] += function.get("arguments") or ""


class SSEDecoder:
    """Server-sent events, line by line (per the HTML specification: ``data:`` with or
    without a space, several data lines joined by newlines, comments and other fields
    ignored). `feed` returns an event's data when a blank line ends it."""

    def __init__(self) -> None:
        self._data: list[str] = []

    def feed(self, line: str) -> str | None:
        line = line.rstrip("\r\n")
        if not line:
            data, self._data = self._data, []
            return "\n".join(data) if data else None
        name, _, value = line.partition(":")
        if name == "data":
            self._data.append(value[1:] if value.startswith(" ") else value)
        return None


def error_from_response(status: int, body: bytes, retry_after: str | None = None) -> LLMError:
    """An `LLMError` for an HTTP error answer, with the server's own message and error code
    where it gave them, and its Retry-After (in seconds) where it said one."""
    code = None
    try:
        payload = orjson.loads(body)
        detail = _message(payload)
        code = _code(payload)
    except (orjson.JSONDecodeError, TypeError, AttributeError):
        detail = body[:300].decode(errors="replace")
    return LLMError(
        f"model call failed: {status} {detail}",
        status_code=status,
        code=code,
        retry_after=_seconds(retry_after),
    )


def _code(payload: dict[str, Any]) -> str | None:
    error = payload.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else None


def _seconds(retry_after: str | None) -> float | None:
    # Retry-After in seconds, as the proxy and vLLM send it (an HTTP date is not waited for).
    try:
        return max(0.0, float(retry_after)) if retry_after else None
    except ValueError:
        return None


def _message(payload: dict[str, Any]) -> str:
    error = payload.get("error", payload)
    return str(error.get("message", error)) if isinstance(error, dict) else str(error)


def _usage(usage: dict[str, Any] | None) -> dict[str, int]:
    if not usage:
        return {}
    return {k: v for k, v in usage.items() if isinstance(v, int) and not isinstance(v, bool)}
