"""Per-key rate limits (in process, shared through a real Redis) and per-task usage."""

from __future__ import annotations

import subprocess
from pathlib import Path

import openai
import pytest
import redis
from proxy_support import (
    ProxyFactory,
    ReplicaFactory,
    chat,
    free_port,
    metric,
    upstreams_of,
    wait_until,
)

from services.llm_proxy.sync import ratelimit_key
from services.llm_proxy.usage import task_usage_key

# An hour-long window: a test never straddles a window boundary.
KEYS = {
    "TASKYARD_PROXY_KEYS": "k-req:2:0:alpha,k-tok:0:5:beta,k-shared:3:0:shared,k-free",
    "TASKYARD_PROXY_RATE_WINDOW_S": "3600",
}


def _client(proxy_base_url: str, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy_base_url, api_key=key, max_retries=0)


def _with_redis(url: str) -> dict[str, str]:
    return {
        **KEYS,
        "TASKYARD_PROXY_REDIS_SYNC": "true",
        "TASKYARD_PROXY_REDIS_URL": url,
        "TASKYARD_PROXY_SYNC_INTERVAL_S": "0.05",
    }


@pytest.fixture
def flushed_redis(proxy_redis: str) -> redis.Redis:
    client = redis.Redis.from_url(proxy_redis, decode_responses=True)
    client.flushdb()
    return client


def test_a_key_past_its_request_budget_gets_429(
    replicas: ReplicaFactory, proxy: ProxyFactory
) -> None:
    px = proxy(upstreams_of(replicas(1)), env=KEYS)
    limited = _client(px.base_url, "k-req")
    chat(limited)
    chat(limited)
    with pytest.raises(openai.RateLimitError) as info:
        chat(limited)
    assert info.value.body["code"] == "rate_limit_exceeded"
    assert int(info.value.response.headers["retry-after"]) >= 1
    for _ in range(4):  # other keys are not affected
        chat(_client(px.base_url, "k-free"))


def test_a_key_past_its_token_budget_gets_429(
    replicas: ReplicaFactory, proxy: ProxyFactory
) -> None:
    px = proxy(upstreams_of(replicas(1)), env=KEYS)
    limited = _client(px.base_url, "k-tok")
    chat(limited)  # the scripted answer alone is more than 5 tokens
    with pytest.raises(openai.RateLimitError) as info:
        chat(limited)
    assert "token" in info.value.message


def test_budgets_are_shared_between_proxies_through_redis(
    replicas: ReplicaFactory, proxy: ProxyFactory, proxy_redis: str, flushed_redis: redis.Redis
) -> None:
    upstreams = upstreams_of(replicas(1))
    proxies = [proxy(upstreams, env=_with_redis(proxy_redis)) for _ in range(2)]
    first, second = (_client(px.base_url, "k-shared") for px in proxies)

    def shared_requests() -> int:
        keys = flushed_redis.keys(ratelimit_key("shared", 0).rsplit(":", 1)[0] + ":*")
        return sum(int(flushed_redis.hget(k, "req") or 0) for k in keys)

    chat(first)
    chat(first)
    wait_until(lambda: shared_requests() == 2)
    chat(second)  # the second proxy spent nothing itself yet: 1 of its 3
    wait_until(lambda: shared_requests() == 3)
    for px in proxies:  # two more syncs each: both have read back the total of 3
        syncs = metric(px, "taskyard_proxy_redis_syncs_total")
        wait_until(lambda px=px, s=syncs: metric(px, "taskyard_proxy_redis_syncs_total") >= s + 2)
    for client in (first, second):
        with pytest.raises(openai.RateLimitError):
            chat(client)


def test_usage_per_task_reaches_redis(
    replicas: ReplicaFactory, proxy: ProxyFactory, proxy_redis: str, flushed_redis: redis.Redis
) -> None:
    px = proxy(upstreams_of(replicas(1)), env=_with_redis(proxy_redis))
    client = _client(px.base_url, "k-free")
    task = {"X-Task-ID": "task-42"}
    whole = client.chat.completions.create(
        model="scripted", messages=[{"role": "user", "content": "count me"}], extra_headers=task
    )
    stream = client.chat.completions.create(
        model="scripted",
        messages=[{"role": "user", "content": "count me"}],
        stream=True,
        extra_headers=task,
    )
    assert all(chunk.usage is None for chunk in stream)  # the client did not ask for usage
    assert whole.usage is not None
    expected = {
        "prompt_tokens": str(2 * whole.usage.prompt_tokens),
        "completion_tokens": str(2 * whole.usage.completion_tokens),
        "requests": "2",
    }
    key = task_usage_key("task-42")
    wait_until(lambda: flushed_redis.hgetall(key) == expected)


def _start_redis(port: int, data_dir: Path) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(data_dir),
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        stdout=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port)
    wait_until(lambda: _pings(client))
    client.close()
    return process


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


def test_usage_survives_a_redis_outage(
    replicas: ReplicaFactory, proxy: ProxyFactory, tmp_path: Path
) -> None:
    port = free_port()
    server = _start_redis(port, tmp_path)
    url = f"redis://127.0.0.1:{port}/0"
    px = proxy(upstreams_of(replicas(1)), env=_with_redis(url))
    client = _client(px.base_url, "k-free")
    server.terminate()
    server.wait()
    for _ in range(2):  # counted while Redis is away
        client.chat.completions.create(
            model="scripted",
            messages=[{"role": "user", "content": "x"}],
            extra_headers={"X-Task-ID": "task-outage"},
        )
    failed = 'taskyard_proxy_errors_total{kind="redis_sync"}'
    wait_until(lambda: metric(px, failed, absent=0) >= 1)  # a sync failed with the usage in hand
    server = _start_redis(port, tmp_path)
    try:
        check = redis.Redis.from_url(url, decode_responses=True)
        wait_until(lambda: check.hget(task_usage_key("task-outage"), "requests") == "2")
        check.close()
    finally:
        server.terminate()
        server.wait()
