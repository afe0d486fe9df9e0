"""A tiny OpenAI-compatible server for tests: records requests and answers from a script."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from taskyard.http1.openai_errors import error_body


@dataclass
class Reply:
    """One scripted answer: text, tool calls as (id, name, arguments JSON), or an error status."""

    text: str = ""
    tool_calls: list[tuple[str, str, str]] = field(default_factory=list)
    status: int = 200
    code: str | None = None  # an error's OpenAI code
    retry_after: str | None = None  # an error's Retry-After header


@dataclass
class Recorded:
    headers: dict[str, str]
    body: dict[str, Any]


class FakeOpenAI:
    """The server's state: scripted replies in, recorded requests out."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[Recorded] = []
        self.base_url = ""

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def next_reply(self) -> Reply:
        return self.replies.popleft() if self.replies else Reply(text="ok")


def _completion(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in reply.tool_calls
        ]
    finish = "tool_calls" if reply.tool_calls else "stop"
    return {
        "id": "cmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": body["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


def _chunk(body: dict[str, Any], delta: dict[str, Any], finish: str | None = None) -> bytes:
    chunk = {
        "id": "cmpl-1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": body["model"],
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def _stream(body: dict[str, Any], reply: Reply) -> Iterator[bytes]:
    yield _chunk(body, {"role": "assistant", "content": ""})
    for word in reply.text.split(" "):
        yield _chunk(body, {"content": word if word == reply.text.split(" ")[0] else " " + word})
    for index, (call_id, name, arguments) in enumerate(reply.tool_calls):
        head = {"index": index, "id": call_id, "type": "function"}
        half = len(arguments) // 2  # arguments arrive in pieces, as real servers send them
        head["function"] = {"name": name, "arguments": arguments[:half]}
        yield _chunk(body, {"tool_calls": [head]})
        tail = {"index": index, "function": {"arguments": arguments[half:]}}
        yield _chunk(body, {"tool_calls": [tail]})
    yield _chunk(body, {}, "tool_calls" if reply.tool_calls else "stop")
    if (body.get("stream_options") or {}).get("include_usage"):
        usage = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
        chunk = {"id": "cmpl-1", "object": "chat.completion.chunk", "created": 0,
                 "model": body["model"], "choices": [], "usage": usage}  # fmt: skip
        yield b"data: " + json.dumps(chunk).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"


def make_handler(state: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append(Recorded({k.lower(): v for k, v in self.headers.items()}, body))
            reply = state.next_reply()
            if reply.status != 200:
                error = error_body("scripted failure", "server_error", reply.code)
                extra = {"Retry-After": reply.retry_after} if reply.retry_after else {}
                self._send(reply.status, "application/json", error, extra)
            elif body.get("stream"):
                self._send(200, "text/event-stream", b"".join(_stream(body, reply)))
            else:
                self._send(200, "application/json", json.dumps(_completion(body, reply)).encode())

        def _send(
            self, status: int, kind: str, payload: bytes, extra: dict[str, str] | None = None
        ) -> None:
            self.send_response(status)
            for name, value in (extra or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: object) -> None:
            pass

    return Handler
