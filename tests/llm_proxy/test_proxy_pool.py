"""Routing, health, fallback and backpressure of a live proxy in front of scripted replicas."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import openai
import pytest
from proxy_support import (
    ProxyFactory,
    ReplicaFactory,
    chat,
    client_for,
    metric,
    upstreams_of,
)
from waiting import wait_until

SYSTEM = "You are the taskyard agent. Use tools when they help. " * 8


def test_a_session_stays_on_one_replica(replicas: ReplicaFactory, proxy: ProxyFactory) -> None:
    px = proxy(upstreams_of(replicas(3)))
    client = client_for(px)
    homes = {}
    for session in [f"session-{i}" for i in range(8)]:
        ports = {chat(client, f"turn {turn}", session=session)[1] for turn in range(4)}
        assert len(ports) == 1
        homes[session] = ports.pop()
    assert len(set(homes.values())) >= 2


def test_a_shared_system_prompt_lands_on_one_replica(
    replicas: ReplicaFactory, proxy: ProxyFactory
) -> None:
    px = proxy(upstreams_of(replicas(3)))
    client = client_for(px)
    ports = {
        chat(
            client,
            messages=[
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": f"question {i}"},
            ],
        )[1]
        for i in range(10)
    }
    assert len(ports) == 1


def test_round_robin_is_a_configuration_option(
    replicas: ReplicaFactory, proxy: ProxyFactory
) -> None:
    group = replicas(3)
    px = proxy(upstreams_of(group), policy="round_robin")
    client = client_for(px)
    ports = [chat(client, session="one-session")[1] for _ in range(6)]
    assert set(ports) == {str(r.port) for r in group}


def test_a_dead_replica_is_readmitted_after_a_good_probe(
    replicas: ReplicaFactory, proxy: ProxyFactory
) -> None:
    group = replicas(2)
    px = proxy(upstreams_of(group))
    client = client_for(px)
    port = group[1].port
    group[1].kill()
    assert {chat(client, f"q{i}")[1] for i in range(6)} == {str(group[0].port)}
    assert httpx.get(f"{px.url}/readyz").json()["healthy_replicas"] == 1
    group[1].start()  # on its old port
    wait_until(lambda: httpx.get(f"{px.url}/readyz").json()["healthy_replicas"] == 2)
    served = {chat(client, session=f"s{i}")[1] for i in range(12)}
    assert str(port) in served


def test_a_model_falls_back_when_its_replicas_are_down(
    replicas: ReplicaFactory, proxy: ProxyFactory
) -> None:
    (big,) = replicas(1, "--model", "big")
    (small,) = replicas(1, "--model", "small")
    px = proxy(f"big={big.url},small={small.url}", env={"TASKYARD_PROXY_FALLBACKS": "big=small"})
    client = client_for(px)
    assert chat(client, model="big")[1] == str(big.port)
    big.kill()
    for _ in range(3):
        text, port = chat(client, model="big")
        assert port == str(small.port) and text


class _ContextLimitedModel(BaseHTTPRequestHandler):
    """A scripted model whose context is always too short, answering as vLLM does."""

    def do_GET(self) -> None:
        self._reply(200, {"object": "list", "data": [{"id": "tiny", "object": "model"}]})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self._reply(
            400,
            {
                "object": "error",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
                "message": "This model's maximum context length is 16 tokens. However, you "
                "requested 900 tokens in the messages. Please reduce the length.",
            },
        )

    def _reply(self, status: int, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def context_limited() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ContextLimitedModel)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_a_model_falls_back_when_the_context_is_too_long(
    replicas: ReplicaFactory, proxy: ProxyFactory, context_limited: str
) -> None:
    (large,) = replicas(1, "--model", "long-context")
    px = proxy(
        f"tiny={context_limited},long-context={large.url}",
        env={"TASKYARD_PROXY_FALLBACKS": "tiny=long-context"},
    )
    text, port = chat(client_for(px), "a long prompt " * 300, model="tiny")
    assert port == str(large.port) and text


def test_without_a_fallback_the_context_error_reaches_the_client(
    proxy: ProxyFactory, context_limited: str
) -> None:
    px = proxy(f"tiny={context_limited}")
    with pytest.raises(openai.BadRequestError) as info:
        chat(client_for(px), model="tiny")
    assert "maximum context length" in info.value.message


def test_past_every_bound_requests_queue_then_get_429_or_503(
    replicas: ReplicaFactory, proxy: ProxyFactory
) -> None:
    (slow,) = replicas(1, "--latency-ms", "2500")
    px = proxy(
        slow.url,
        env={
            "TASKYARD_PROXY_MAX_IN_FLIGHT": "1",
            "TASKYARD_PROXY_QUEUE_SIZE": "1",
            "TASKYARD_PROXY_QUEUE_TIMEOUT_S": "1.0",
        },
    )
    client = client_for(px)
    outcomes: dict[str, object] = {}

    def call(name: str) -> None:
        try:
            outcomes[name] = chat(client)[1]
        except openai.APIStatusError as exc:
            outcomes[name] = exc

    first = threading.Thread(target=call, args=("first",))
    first.start()
    wait_until(lambda: metric(px, "taskyard_proxy_replica_in_flight") == 1)
    queued = threading.Thread(target=call, args=("queued",))
    queued.start()
    wait_until(lambda: metric(px, "taskyard_proxy_queue_length") == 1)
    call("refused")
    queued.join()
    first.join()
    refused, timed_out = outcomes["refused"], outcomes["queued"]
    assert isinstance(refused, openai.RateLimitError)
    assert refused.response.headers["retry-after"] and refused.body["code"] == "overloaded"
    assert isinstance(timed_out, openai.APIStatusError) and timed_out.status_code == 503
    assert timed_out.response.headers["retry-after"] == "1"
    assert outcomes["first"] == str(slow.port)


def test_a_yaml_pool_file_configures_groups_weights_and_fallbacks(
    replicas: ReplicaFactory, proxy: ProxyFactory, tmp_path: Path
) -> None:
    (a,) = replicas(1, "--model", "alpha")
    (b,) = replicas(1, "--model", "beta")
    pool = tmp_path / "pool.yaml"
    pool.write_text(
        "replicas:\n"
        f"  - {{url: '{a.url}', model: alpha, weight: 2, max_in_flight: 8}}\n"
        f"  - {{url: '{b.url}', model: beta}}\n"
        "fallbacks:\n  alpha: [beta]\n"
    )
    px = proxy(pool_file=str(pool))
    client = client_for(px)
    assert {m.id for m in client.models.list()} == {"alpha", "beta"}
    assert chat(client, model="beta")[1] == str(b.port)
    a.kill()
    assert chat(client, model="alpha")[1] == str(b.port)
