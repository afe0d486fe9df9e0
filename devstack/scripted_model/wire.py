"""OpenAI wire format: the JSON bodies and server-sent-event chunks the scripted model sends.

Shapes follow what OpenAI and vLLM send, so a client (or proxy) written against them works
unchanged against the scripted model.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any

from devstack.scripted_model.script import ScriptedTurn, ToolCallTurn

__all__ = [
    "OWNER",
    "Completion",
    "chat_body",
    "chat_chunks",
    "count_completion_tokens",
    "models_body",
    "split_tokens",
    "text_completion_body",
    "text_completion_chunks",
]

OWNER = "taskyard-scripted"
_DONE = b"data: [DONE]\n\n"
_TOKEN = re.compile(r"\s*\S+")
_ARGUMENT_PIECE = 16  # characters of tool-call arguments per streamed chunk


@dataclass(frozen=True, slots=True)
class Completion:
    """One answer ready to encode: the turn, the model name asked for, and the token counts."""

    turn: ScriptedTurn
    model: str
    prompt_tokens: int
    completion_tokens: int

    def usage(self) -> dict[str, int]:
        total = self.prompt_tokens + self.completion_tokens
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": total,
        }


def split_tokens(text: str) -> list[str]:
    """Words with their leading whitespace: the scripted model's tokens."""
    return _TOKEN.findall(text)


def count_completion_tokens(turn: ScriptedTurn) -> int:
    """How many tokens (streamed pieces) the turn is made of."""
    if turn.tool_call is not None:
        return 1 + len(_pieces(turn.tool_call.arguments))
    return len(split_tokens(turn.text))


def chat_body(completion: Completion) -> bytes:
    """A non-streamed `chat.completion` response."""
    turn = completion.turn
    message: dict[str, Any] = {"role": "assistant", "content": turn.text}
    finish = "stop"
    if turn.tool_call is not None:
        calls = [_tool_call(turn.tool_call)]
        message = {"role": "assistant", "content": None, "tool_calls": calls}
        finish = "tool_calls"
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
    body = _envelope("chat.completion", completion.model, [choice])
    body["usage"] = completion.usage()
    return _dump(body)


def chat_chunks(completion: Completion, include_usage: bool) -> list[bytes]:
    """Every SSE event of a streamed chat completion, `[DONE]` included."""
    envelope = _envelope("chat.completion.chunk", completion.model, [])
    turn = completion.turn
    first: dict[str, Any] = {"role": "assistant", "content": ""}
    deltas = [first]
    if turn.tool_call is None:
        deltas += [{"content": token} for token in split_tokens(turn.text)]
        finish = "stop"
    else:
        first["content"] = None
        deltas += _tool_call_deltas(turn.tool_call)
        finish = "tool_calls"
    events = [_chunk(envelope, delta, None) for delta in deltas]
    events.append(_chunk(envelope, {}, finish))
    if include_usage:
        events.append(_sse({**envelope, "choices": [], "usage": completion.usage()}))
    events.append(_DONE)
    return events


def text_completion_body(completion: Completion) -> bytes:
    """A non-streamed legacy `text_completion` response."""
    choice = {"index": 0, "text": completion.turn.text, "logprobs": None, "finish_reason": "stop"}
    body = _envelope("text_completion", completion.model, [choice])
    body["usage"] = completion.usage()
    return _dump(body)


def text_completion_chunks(completion: Completion, include_usage: bool) -> list[bytes]:
    """Every SSE event of a streamed legacy completion, `[DONE]` included."""
    envelope = _envelope("text_completion", completion.model, [])
    texts = split_tokens(completion.turn.text)
    events = [_text_chunk(envelope, text, None) for text in texts]
    events.append(_text_chunk(envelope, "", "stop"))
    if include_usage:
        events.append(_sse({**envelope, "choices": [], "usage": completion.usage()}))
    events.append(_DONE)
    return events


def models_body(model: str) -> bytes:
    """`GET /v1/models`: the one (scripted) model this server serves."""
    entry = {"id": model, "object": "model", "created": 0, "owned_by": OWNER}
    return _dump({"object": "list", "data": [entry]})


def _envelope(kind: str, model: str, choices: list[Any]) -> dict[str, Any]:
    prefix = "chatcmpl" if kind.startswith("chat") else "cmpl"
    return {
        "id": f"{prefix}-{secrets.token_hex(12)}",
        "object": kind,
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": OWNER,
        "choices": choices,
    }


def _tool_call(call: ToolCallTurn) -> dict[str, Any]:
    function = {"name": call.name, "arguments": call.arguments}
    return {"id": f"call_{secrets.token_hex(12)}", "type": "function", "function": function}


def _tool_call_deltas(call: ToolCallTurn) -> list[dict[str, Any]]:
    head = {**_tool_call(call), "index": 0, "function": {"name": call.name, "arguments": ""}}
    pieces = _pieces(call.arguments)
    return [{"tool_calls": [head]}] + [
        {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]} for piece in pieces
    ]


def _pieces(text: str) -> list[str]:
    return [text[i : i + _ARGUMENT_PIECE] for i in range(0, len(text), _ARGUMENT_PIECE)]


def _chunk(envelope: dict[str, Any], delta: dict[str, Any], finish: str | None) -> bytes:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return _sse({**envelope, "choices": [choice]})


def _text_chunk(envelope: dict[str, Any], text: str, finish: str | None) -> bytes:
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
    return _sse({**envelope, "choices": [choice]})


def _sse(payload: dict[str, Any]) -> bytes:
    return b"data: " + _dump(payload) + b"\n\n"


def _dump(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()
