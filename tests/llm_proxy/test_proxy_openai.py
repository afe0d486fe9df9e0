"""The proxy's OpenAI surface, driven by the official SDK, in front of scripted replicas."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families
from proxy_support import (
    API_KEY,
    ProxyFactory,
    ReplicaFactory,
    client_for,
    metric,
    metric_settles,
    upstreams_of,
)

MESSAGES = [{"role": "user", "content": "say hello"}]


def test_chat_completion_round_trip(replicas: ReplicaFactory, proxy: ProxyFactory) -> None:
    px = proxy(upstreams_of(replicas(2)))
    reply = client_for(px).chat.completions.create(model="scripted", messages=MESSAGES)
    assert reply.choices[0].message.content
    assert reply.usage is not None and reply.usage.completion_tokens > 0


def test_chat_stream_passes_through_and_hides_unasked_usage(
    replicas: ReplicaFactory, proxy: ProxyFactory
) -> None:
    px = proxy(upstreams_of(replicas(1)))
    chunks = list(
        client_for(px).chat.completions.create(model="scripted", messages=MESSAGES, stream=True)
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text
    # The proxy asked the replica for usage; the client did not, so it must not see it.
    assert all(c.usage is None and c.choices for c in chunks)


def test_chat_stream_with_usage_when_asked(replicas: ReplicaFactory, proxy: ProxyFactory) -> None:
    px = proxy(upstreams_of(replicas(1)))
    chunks = list(
        client_for(px).chat.completions.create(
            model="scripted",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0
    assert chunks[-1].choices == []


def test_text_completions_stream_and_not(replicas: ReplicaFactory, proxy: ProxyFactory) -> None:
    px = proxy(upstreams_of(replicas(1)))
    client = client_for(px)
    reply = client.completions.create(model="scripted", prompt="once upon a time")
    assert reply.choices[0].text
    streamed = list(client.completions.create(model="scripted", prompt="hello", stream=True))
    assert "".join(c.choices[0].text for c in streamed if c.choices)


def test_models_is_the_union_of_the_pool(replicas: ReplicaFactory, proxy: ProxyFactory) -> None:
    small = replicas(1, "--model", "small")
    big = replicas(1, "--model", "big")
    px = proxy(f"small={small[0].url},big={big[0].url}")
    names = {m.id for m in client_for(px).models.list()}
    assert names == {"small", "big"}


def test_wildcard_replica_lists_discovered_models(
    replicas: ReplicaFactory, proxy: ProxyFactory
) -> None:
    px = proxy(upstreams_of(replicas(1)))
    assert [m.id for m in client_for(px).models.list()] == ["scripted"]


def test_health_ready_and_metrics(replicas: ReplicaFactory, proxy: ProxyFactory) -> None:
    px = proxy(upstreams_of(replicas(2)))
    client_for(px).chat.completions.create(model="scripted", messages=MESSAGES)
    assert httpx.get(f"{px.url}/healthz").json() == {"status": "ok"}
    ready = httpx.get(f"{px.url}/readyz").json()
    assert ready["healthy_replicas"] == 2
    metrics = httpx.get(f"{px.url}/metrics").text
    assert metric(px, 'taskyard_proxy_requests_total{endpoint="chat",status="200"}') == 1
    assert metric(px, 'taskyard_proxy_tokens_total{tenant="default",kind="completion"}') > 0
    assert metric(px, 'taskyard_proxy_request_seconds_count{endpoint="chat"}') == 1
    families = {family.name for family in text_string_to_metric_families(metrics)}
    assert {
        "taskyard_proxy_requests",
        "taskyard_proxy_request_seconds",
        "taskyard_proxy_replica_healthy",
        "taskyard_proxy_tokens",
    } <= families


def test_wrong_key_is_refused(replicas: ReplicaFactory, proxy: ProxyFactory) -> None:
    px = proxy(upstreams_of(replicas(1)))
    client = openai.OpenAI(base_url=px.base_url, api_key="not-" + API_KEY, max_retries=0)
    with pytest.raises(openai.AuthenticationError) as info:
        client.chat.completions.create(model="scripted", messages=MESSAGES)
    assert info.value.body["code"] == "invalid_api_key"


def test_usage_header_on_whole_answers(replicas: ReplicaFactory, proxy: ProxyFactory) -> None:
    px = proxy(upstreams_of(replicas(1)))
    raw = client_for(px).chat.completions.with_raw_response.create(
        model="scripted", messages=MESSAGES
    )
    usage = raw.parse().usage
    assert usage is not None
    assert raw.headers["x-taskyard-usage"] == (
        f"prompt_tokens={usage.prompt_tokens}, completion_tokens={usage.completion_tokens}"
    )


_LINGER_S = 0.3


class _LooseSseModel(BaseHTTPRequestHandler):
    """A scripted OpenAI-like model in another dialect: HTTP/1.0 (the body ends when the
    connection closes, here a while after `[DONE]`: a client that read `[DONE]` has gone by
    then), CRLF event breaks, spaced JSON and `"usage": null` on every chunk."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        usage_asked = (request.get("stream_options") or {}).get("include_usage")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for piece in ("Hel", "lo"):
            self._event({"choices": [{"index": 0, "delta": {"content": piece}}], "usage": None})
            self.wfile.flush()
        if usage_asked:
            usage = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
            self._event({"choices": [], "usage": usage})
        self.wfile.write(b"data: [DONE]\r\n\r\n")
        self.wfile.flush()
        time.sleep(_LINGER_S)

    def _event(self, fields: dict[str, object]) -> None:
        chunk = {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "loose",
            **fields,
        }
        self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\r\n\r\n")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def loose_model() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _LooseSseModel)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_other_sse_dialects_relay_and_count_usage(proxy: ProxyFactory, loose_model: str) -> None:
    px = proxy(loose_model)
    client = client_for(px)
    messages = [{"role": "user", "content": "hi"}]
    plain = list(client.chat.completions.create(model="loose", messages=messages, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in plain) == "Hello"
    assert all(c.usage is None and c.choices for c in plain)
    asked = list(
        client.chat.completions.create(
            model="loose", messages=messages, stream=True, stream_options={"include_usage": True}
        )
    )
    assert asked[-1].usage is not None and asked[-1].usage.total_tokens == 5
    tokens = 'taskyard_proxy_tokens_total{tenant="default",kind="completion"}'
    assert metric_settles(px, tokens, 4) == 4
