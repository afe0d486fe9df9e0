"""What the proxy reads from a request body: model, stream, usage option and a routing key.

The body is forwarded as received. The one rewrite on the hot path asks a stream for its
usage chunk (`stream_options.include_usage`) when the client did not, so tokens are counted
for every request; the relay then strips that chunk again.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from services.llm_proxy.errors import BadRequest
from services.llm_proxy.routing.ring import hash_key

__all__ = ["ParsedRequest", "parse_request", "prompt_prefix", "with_model"]

_INCLUDE_USAGE = b'"stream_options":{"include_usage":true},'


@dataclass(slots=True)
class ParsedRequest:
    """A validated completion request, ready to forward."""

    data: dict[str, Any]
    body: bytes
    model: str
    stream: bool
    client_wants_usage: bool
    route_key: int | None


def parse_request(
    body: bytes, chat: bool, session_id: bytes | None, prefix_chars: int
) -> ParsedRequest:
    """Validate a chat (`chat`) or text completion body; raise `BadRequest` if it is not one."""
    data = _load_object(body)
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("'model' is required and must be a string")
    _check_input(data, chat)
    stream = data.get("stream") is True
    options = data.get("stream_options")
    wants_usage = isinstance(options, dict) and options.get("include_usage") is True
    if stream and not wants_usage:
        body = _ask_for_usage(body, data, options)
    if session_id:
        key: int | None = hash_key(session_id)
    else:
        prefix = prompt_prefix(data, chat, prefix_chars)
        key = hash_key(prefix.encode()) if prefix else None
    return ParsedRequest(data, body, model, stream, wants_usage or not stream, key)


def _load_object(body: bytes) -> dict[str, Any]:
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"the body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object")
    return data


def _check_input(data: dict[str, Any], chat: bool) -> None:
    if chat:
        messages = data.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequest("'messages' is required and must be a non-empty list")
        if not all(isinstance(m, dict) for m in messages):
            raise BadRequest("each message must be an object")
    elif data.get("prompt") is None:
        raise BadRequest("'prompt' is required")


def _ask_for_usage(body: bytes, data: dict[str, Any], options: Any) -> bytes:
    if options is None and "stream_options" not in data:
        # Splicing the field in after the opening brace spares re-serialising the prompt.
        start = body.index(b"{") + 1
        return body[:start] + _INCLUDE_USAGE + body[start:]
    merged = options if isinstance(options, dict) else {}
    return orjson.dumps({**data, "stream_options": {**merged, "include_usage": True}})


def prompt_prefix(data: dict[str, Any], chat: bool, limit: int) -> str:
    """The prompt's first `limit` characters (roles and text), the key for prefix routing."""
    parts: list[str] = []
    size = 0
    for text in _prompt_texts(data, chat):
        parts.append(text)
        size += len(text)
        if size >= limit:
            break
    return "\x00".join(parts)[:limit]


def _prompt_texts(data: dict[str, Any], chat: bool) -> Iterator[str]:
    if not chat:
        prompt = data.get("prompt")
        yield prompt if isinstance(prompt, str) else orjson.dumps(prompt).decode()
        return
    for message in data.get("messages", []):
        content = message.get("content")
        if not isinstance(content, str):
            content = orjson.dumps(content).decode()
        yield f"{message.get('role', '')}:{content}"  # not a Redis key


def with_model(request: ParsedRequest, model: str) -> bytes:
    """The request's body asking for another model (a fallback group)."""
    return orjson.dumps({**orjson.loads(request.body), "model": model})
