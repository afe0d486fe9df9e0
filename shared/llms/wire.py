"""The OpenAI wire format, once for both clients: request arguments, and completions (whole or
streamed) turned into text or an `LLMResponse`. No I/O here."""

from __future__ import annotations

from typing import Any

from openai.types import CompletionUsage
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from shared.llms.base import ChatMessages, ChatResult
from shared.schema import LLMResponse, ToolCall

__all__ = ["StreamAccumulator", "post_args", "request_args", "session_headers", "to_result"]


def session_headers(session_id: int | str | None, task_id: str | None) -> dict[str, str]:
    """``X-Session-ID`` (routing affinity) and ``X-Task-ID`` (usage per task), where known."""
    headers = {}
    if session_id is not None:
        headers["X-Session-ID"] = str(session_id)
    if task_id is not None:
        headers["X-Task-ID"] = str(task_id)
    return headers


def request_args(
    model: str,
    messages: ChatMessages,
    *,
    tools: list[dict[str, Any]] | None,
    params: dict[str, Any],
    headers: dict[str, str],
    stream: bool,
) -> dict[str, Any]:
    """Keyword arguments for ``client.chat.completions.create``."""
    args: dict[str, Any] = {"model": model, "messages": messages, **params}
    if tools:  # an empty ``tools`` list is rejected by OpenAI-compatible servers
        args["tools"] = tools
    if stream:
        args.update(stream=True, stream_options={"include_usage": True})
    args["extra_headers"] = headers
    return args


def post_args(args: dict[str, Any]) -> dict[str, Any]:
    """`request_args` as the SDK's low-level ``client.post`` takes them.

    The body goes out as built: ``chat.completions.create`` would first walk every message
    through the SDK's typed-params transform, which costs milliseconds per call once a
    session's history is long, more than the rest of an agent step.
    """
    body = {key: value for key, value in args.items() if key != "extra_headers"}
    return {"body": body, "options": {"headers": args["extra_headers"]}}


def to_result(completion: ChatCompletion, with_tools: bool) -> ChatResult:
    """The first choice as text, or as an `LLMResponse` when tools were offered."""
    choice = completion.choices[0]
    calls = [
        ToolCall(id=c.id, name=c.function.name, parameters=c.function.arguments)
        for c in choice.message.tool_calls or []
        if c.type == "function"
    ]
    response = LLMResponse(
        text=choice.message.content or "",
        tool_calls=calls,
        finish_reason=choice.finish_reason,
        usage=_usage(completion.usage),
    )
    return response if with_tools else response.text


class StreamAccumulator:
    """Folds streamed chunks into the turn so far (text, tool calls by index, usage)."""

    def __init__(self) -> None:
        self.text = ""
        self.finish_reason: str | None = None
        self.usage: dict[str, int] = {}
        self._calls: dict[int, dict[str, str]] = {}

    def add(self, chunk: ChatCompletionChunk) -> bool:
        """Take one chunk; True if the text grew."""
        if chunk.usage:
            self.usage = _usage(chunk.usage)
        if not chunk.choices:
            return False
        choice = chunk.choices[0]
        self.finish_reason = choice.finish_reason or self.finish_reason
        for delta in choice.delta.tool_calls or []:
            self._add_call(delta.index, delta.id, delta.function)
        self.text += choice.delta.content or ""
        return bool(choice.delta.content)

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

    def _add_call(self, index: int, call_id: str | None, function: Any) -> None:
        slot = self._calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
        slot["id"] = call_id or slot["id"]
        if function is not None:
            slot["name"] = function.name or slot["name"]
            slot["arguments"] += function.arguments or ""


def _usage(usage: CompletionUsage | None) -> dict[str, int]:
    if usage is None:
        return {}
    return {k: v for k, v in usage.model_dump().items() if isinstance(v, int)}
