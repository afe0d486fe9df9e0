"""The issue's fault tests: dead, slow and broken replicas, and bad input."""

from __future__ import annotations

import threading
from collections import Counter

import httpx
import openai
import pytest
from proxy_support import (
    API_KEY,
    ProxyFactory,
    ReplicaFactory,
    chat,
    client_for,
    metric,
    upstreams_of,
)
from waiting import wait_until

AUTH = {"Authorization": f"Bearer {API_KEY}"}


def _load(
    client: openai.OpenAI,
    threads: int,
    each: int,
    served: Counter[str],
    errors: list[Exception],
    done: list[int],
) -> list[threading.Thread]:
    lock = threading.Lock()

    def work(worker: int) -> None:
        for i in range(each):
            try:
                _, port = chat(client, f"worker {worker} request {i}")
                with lock:
                    served[port] += 1
            except Exception as exc:  # every failure is what the test counts
                with lock:
                    errors.append(exc)
            with lock:
                done[0] += 1

    return [threading.Thread(target=work, args=(w,)) for w in range(threads)]


def test_killing_one_of_three_replicas_under_load_fails_no_request(
    replicas: ReplicaFactory, proxy: ProxyFactory
) -> None:
    group = replicas(3, "--latency-ms", "5")
    px = proxy(upstreams_of(group))
    served: Counter[str] = Counter()
    errors: list[Exception] = []
    done = [0]
    workers = _load(client_for(px), threads=8, each=40, served=served, errors=errors, done=done)
    for worker in workers:
        worker.start()
    while done[0] < 80:
        threading.Event().wait(0.01)
    victim = str(group[0].port)
    before = served[victim]
    group[0].kill()
    for worker in workers:
        worker.join()
    assert errors == []
    assert sum(served.values()) == 320
    assert served[victim] <= before + 8  # at most the requests already in flight
    assert metric(px, f'taskyard_proxy_replica_healthy{{replica="r0-127.0.0.1:{victim}"') == 0


def test_replica_slowed_tenfold_loses_most_new_traffic(
    replicas: ReplicaFactory, proxy: ProxyFactory
) -> None:
    group = replicas(3, "--latency-ms", "25")
    px = proxy(upstreams_of(group))
    client = client_for(px)
    for i in range(30):  # every replica gets a latency sample at normal speed
        chat(client, f"warm-up {i}")
    slow = group[0]
    slow.configure(latency_ms=250)
    served: Counter[str] = Counter()
    errors: list[Exception] = []
    workers = _load(client, threads=6, each=25, served=served, errors=errors, done=[0])
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    assert served[str(slow.port)] < 0.15 * sum(served.values())  # a fair share is a third


def test_every_replica_down_gives_a_clear_503_fast(
    replicas: ReplicaFactory, proxy: ProxyFactory
) -> None:
    group = replicas(2)
    px = proxy(upstreams_of(group))
    client = client_for(px, timeout=5.0)
    chat(client)
    for replica in group:
        replica.kill()
    for _ in range(3):  # found dead by the requests themselves, then known dead
        with pytest.raises(openai.APIStatusError) as info:
            chat(client)
        assert info.value.status_code == 503
        assert info.value.body["code"] == "no_healthy_replica"
        assert info.value.response.headers["retry-after"] == "1"
    assert httpx.get(f"{px.url}/readyz").status_code == 503


def test_stream_cut_mid_way_ends_with_an_error_chunk_and_the_next_request_moves(
    replicas: ReplicaFactory, proxy: ProxyFactory
) -> None:
    group = replicas(2)
    px = proxy(upstreams_of(group), env={"TASKYARD_PROXY_COOLDOWN_S": "30"})
    client = client_for(px)
    _, pinned = chat(client, session="s-1")
    broken = next(r for r in group if str(r.port) == pinned)
    broken.configure(fail_after_chunks=2)
    received = []
    with pytest.raises(openai.APIError) as info:
        for chunk in client.chat.completions.create(
            model="scripted",
            messages=[{"role": "user", "content": "stream please"}],
            stream=True,
            extra_headers={"X-Session-ID": "s-1"},
        ):
            received.append(chunk)
    assert len(received) == 2
    assert "mid-stream" in info.value.message
    assert info.value.body["code"] == "stream_interrupted"
    _, next_port = chat(client, session="s-1")
    assert next_port != pinned


def test_503_answers_are_retried_on_another_replica(
    replicas: ReplicaFactory, proxy: ProxyFactory
) -> None:
    group = replicas(2)
    group[0].configure(fail_status=503)
    px = proxy(upstreams_of(group))
    client = client_for(px)
    ports = {chat(client, f"request {i}")[1] for i in range(10)}
    assert ports == {str(group[1].port)}
    assert metric(px, 'taskyard_proxy_errors_total{kind="retry"}') >= 1


def test_a_client_that_leaves_cancels_its_upstream_stream(
    replicas: ReplicaFactory, proxy: ProxyFactory
) -> None:
    group = replicas(1, "--tokens-per-s", "4")
    px = proxy(upstreams_of(group))
    name = f'taskyard_proxy_replica_in_flight{{replica="r0-127.0.0.1:{group[0].port}"'
    with httpx.stream(
        "POST",
        f"{px.base_url}/chat/completions",
        headers=AUTH,
        json={"model": "scripted", "stream": True, "messages": [{"role": "user", "content": "x"}]},
    ) as response:
        lines = response.iter_lines()  # kept: dropping the iterator closes the response
        assert next(lines).startswith("data: ")
        assert metric(px, name) == 1
    # The stream had seconds to go; the proxy let go of the replica as the client left.
    wait_until(lambda: metric(px, name) == 0, timeout=2.0)


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"{not json", 400, "bad_request"),
        (b'["a", "list"]', 400, "bad_request"),
        (b'{"model": "scripted"}', 400, "bad_request"),
        (b'{"model": "scripted", "messages": []}', 400, "bad_request"),
        (b'{"messages": [{"role": "user", "content": "x"}]}', 400, "bad_request"),
        (
            b'{"model": "nope", "messages": [{"role": "user", "content": "x"}]}',
            404,
            "model_not_found",
        ),
        (
            b'{"model": "small", "messages": "' + b"x" * (10 * 1024 * 1024) + b'"}',
            413,
            "request_too_large",
        ),
    ],
    ids=[
        "malformed",
        "not-object",
        "no-messages",
        "empty-messages",
        "no-model",
        "unknown-model",
        "10MB",
    ],
)
def test_bad_input_gets_a_4xx_openai_error(
    replicas: ReplicaFactory, proxy: ProxyFactory, body: bytes, status: int, code: str
) -> None:
    small = replicas(1, "--model", "small")
    px = proxy(f"small={small[0].url}")
    response = httpx.post(
        f"{px.base_url}/chat/completions",
        content=body,
        headers={**AUTH, "Content-Type": "application/json"},
        timeout=30,
    )
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == code and error["message"] and error["type"]
    # The proxy is still fine after it.
    assert httpx.get(f"{px.url}/healthz").status_code == 200


def test_when_every_replica_refuses_the_last_refusal_is_passed_on(
    replicas: ReplicaFactory, proxy: ProxyFactory
) -> None:
    group = replicas(2)
    for replica in group:
        replica.configure(fail_status=429)
    px = proxy(upstreams_of(group))
    with pytest.raises(openai.RateLimitError) as info:
        chat(client_for(px))
    assert "scripted failure" in info.value.message
    # A busy replica is not a broken one: nobody was ejected.
    assert httpx.get(f"{px.url}/readyz").json()["healthy_replicas"] == 2


def test_a_stopping_proxy_finishes_the_requests_in_progress(
    replicas: ReplicaFactory, proxy: ProxyFactory
) -> None:
    (slow,) = replicas(1, "--latency-ms", "800")
    px = proxy(slow.url)
    client = client_for(px)
    outcome: list[object] = []
    call = threading.Thread(target=lambda: outcome.append(chat(client)[1]))
    call.start()
    wait_until(lambda: metric(px, "taskyard_proxy_replica_in_flight") == 1)
    px.stop()  # SIGTERM while the answer is still on its way
    call.join()
    assert outcome == [str(slow.port)]


def test_a_client_that_gives_up_cancels_its_upstream_request(
    replicas: ReplicaFactory, proxy: ProxyFactory
) -> None:
    (slow,) = replicas(1, "--latency-ms", "5000")
    px = proxy(slow.url)
    with pytest.raises(openai.APITimeoutError):
        chat(client_for(px, timeout=0.5))
    name = f'taskyard_proxy_replica_in_flight{{replica="r0-127.0.0.1:{slow.port}"'
    wait_until(lambda: metric(px, name) == 0, timeout=2.0)  # seconds before the answer
    assert metric(px, 'taskyard_proxy_errors_total{kind="client_gone"}') == 1
    assert metric(px, "taskyard_proxy_replica_healthy") == 1  # not the replica's fault
