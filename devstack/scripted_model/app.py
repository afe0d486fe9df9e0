"""The scripted model's endpoints: parse the OpenAI request, ask the script, encode the turn."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from devstack.scripted_model import wire
from devstack.scripted_model.gate import HoldGate
from devstack.scripted_model.options import ScriptedOptions
from devstack.scripted_model.prefix_cache import PrefixCache
from devstack.scripted_model.reply import Reply
from devstack.scripted_model.script import ScriptedTurn, chat_turn, echo_text, message_text
from taskyard.errors import TaskyardError
from taskyard.http1 import Request
from taskyard.http1.openai_errors import error_body

__all__ = ["ScriptedApp"]

_SSE = b"text/event-stream"


class ScriptedModelError(TaskyardError):
    """The scripted model's root error."""


class _BadRequest(ScriptedModelError):
    """The request cannot be answered; carries the HTTP status and the message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(slots=True)
class _Counters:
    requests: int = 0
    completion_tokens: int = 0
    max_prompt_chars: int = 0  # the longest prompt seen (what the model was sent, in text)


class ScriptedApp:
    """Answers requests for one replica; `replica` names it in every response header."""

    def __init__(self, options: ScriptedOptions, replica: str) -> None:
        self.options = options
        self.replica = replica
        self.cache = PrefixCache(options.prefix_cache) if options.prefix_cache else None
        self.counters = _Counters()
        self.gate = HoldGate()
        self._routes: dict[tuple[bytes, bytes], Callable[[Request], Reply]] = {
            (b"POST", b"/v1/chat/completions"): self._chat,
            (b"POST", b"/v1/completions"): self._completions,
            (b"GET", b"/v1/models"): self._models,
            (b"GET", b"/health"): self._health,
            (b"POST", b"/scripted/config"): self._config,
            (b"GET", b"/scripted/stats"): self._stats,
        }

    def handle(self, request: Request) -> Reply:
        """Route one request; every failure becomes an OpenAI-style error response."""
        route = self._routes.get((request.method, request.path))
        try:
            if request.body_too_large:
                raise _BadRequest(413, "the body is too large")
            if route is None:
                raise _BadRequest(*self._no_route(request))
            return route(request)
        except _BadRequest as error:
            kind = "invalid_request_error"
            return Reply(error.status, error_body(str(error), kind, error.status))
        except Exception as error:  # a bug here must still answer, as an OpenAI server error
            return Reply(500, error_body(f"scripted model: {error!r}", "server_error", 500))

    def _no_route(self, request: Request) -> tuple[int, str]:
        path = request.path.decode("latin-1")
        if any(known == request.path for _, known in self._routes):
            return 405, f"method {request.method.decode('latin-1')} not allowed on {path}"
        return 404, f"no route {path}"

    # model endpoints

    def _chat(self, request: Request) -> Reply:
        payload = _json_object(request.body)
        messages = payload.get("messages")
        if not isinstance(messages, list) or not messages:
            raise _BadRequest(400, "messages must be a non-empty list")
        if not all(isinstance(message, dict) for message in messages):
            raise _BadRequest(400, "each message must be a JSON object")
        tools = payload.get("tools")
        if tools is not None and not isinstance(tools, list):
            raise _BadRequest(400, "tools must be a list")
        prompt = " ".join(f"{m.get('role')}: {message_text(m)}" for m in messages)
        # tool_choice "none" forbids tool calls, as with OpenAI.
        turn = chat_turn(messages, None if payload.get("tool_choice") == "none" else tools)
        return self._answer(payload, prompt, turn, wire.chat_body, wire.chat_chunks)

    def _completions(self, request: Request) -> Reply:
        payload = _json_object(request.body)
        prompt = payload.get("prompt")
        if isinstance(prompt, list):
            prompt = " ".join(str(part) for part in prompt)
        if not isinstance(prompt, str):
            raise _BadRequest(400, "prompt must be a string or a list of strings")
        turn = ScriptedTurn(text=echo_text(prompt))
        return self._answer(
            payload, prompt, turn, wire.text_completion_body, wire.text_completion_chunks
        )

    def _answer(
        self,
        payload: dict[str, Any],
        prompt: str,
        turn: ScriptedTurn,
        encode_body: Callable[[wire.Completion], bytes],
        encode_events: Callable[[wire.Completion, bool], list[bytes]],
    ) -> Reply:
        options = self.options
        include_usage = _include_usage(payload.get("stream_options"))
        if options.fail_status is not None:
            return self._failure(options.fail_status, options.latency_ms)
        tokens = prompt.split()
        prefill_ms, headers = self._prefill(tokens)
        model = str(payload.get("model") or options.model)
        completion = wire.Completion(turn, model, len(tokens), wire.count_completion_tokens(turn))
        self.counters.requests += 1
        self.counters.completion_tokens += completion.completion_tokens
        self.counters.max_prompt_chars = max(self.counters.max_prompt_chars, len(prompt))
        delay_s = (options.latency_ms + prefill_ms) / 1000
        interval_s = 1.0 / options.tokens_per_s if options.tokens_per_s else 0.0
        if payload.get("stream"):
            events = encode_events(completion, include_usage)
            return Reply(
                200, events, _SSE, headers, delay_s, interval_s, options.fail_after_chunks,
                options.hold_until,
            )  # fmt: skip
        generation_s = completion.completion_tokens * interval_s
        return Reply(
            200, encode_body(completion), headers=headers, delay_s=delay_s + generation_s,
            hold_until=options.hold_until,
        )  # fmt: skip

    def _prefill(self, tokens: list[str]) -> tuple[float, tuple[tuple[bytes, bytes], ...]]:
        """The prefix cache's extra time to first token, and its header (none without one)."""
        if self.cache is None:
            return 0.0, ()
        lookup = self.cache.lookup(tokens)
        return self.cache.prefill_ms(lookup), (
            (b"x-prefix-cached-tokens", str(lookup.cached_tokens).encode()),
        )

    def _failure(self, status: int, delay_ms: float) -> Reply:
        self.counters.requests += 1
        kind = "server_error" if status >= 500 else "invalid_request_error"
        body = error_body(f"scripted failure: status {status} configured", kind, status)
        return Reply(status, body, delay_s=delay_ms / 1000)

    def _models(self, request: Request) -> Reply:
        return Reply(200, wire.models_body(self.options.model))

    def _health(self, request: Request) -> Reply:
        return Reply(200, b'{"status":"ok","scripted":true}')

    # control endpoints

    def _config(self, request: Request) -> Reply:
        try:
            self.options.update(_json_object(request.body))
        except ValueError as error:
            raise _BadRequest(400, str(error)) from error
        if self.options.hold_until is None:
            self.gate.release()
        return Reply(200, json.dumps(self.options.runtime_view()).encode())

    def _stats(self, request: Request) -> Reply:
        stats: dict[str, Any] = {
            "replica": self.replica,
            "requests": self.counters.requests,
            "completion_tokens": self.counters.completion_tokens,
            "max_prompt_chars": self.counters.max_prompt_chars,
            "held": self.gate.held,
            "peak_held": self.gate.peak,
            "prefix_cache": self.cache is not None,
        }
        if self.cache is not None:
            stats.update(self.cache.stats())
        return Reply(200, json.dumps(stats).encode())


def _include_usage(stream_options: Any) -> bool:
    if stream_options is not None and not isinstance(stream_options, dict):
        raise _BadRequest(400, "stream_options must be an object")
    return bool((stream_options or {}).get("include_usage"))


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        payload = json.loads(body or b"{}")
    except ValueError as error:
        raise _BadRequest(400, f"body is not JSON: {error}") from error
    if not isinstance(payload, dict):
        raise _BadRequest(400, "body must be a JSON object")
    return payload
