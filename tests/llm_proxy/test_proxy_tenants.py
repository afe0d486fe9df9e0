"""Per-tenant rate limits (in process, shared through a real Redis) for plain API keys and
tenant tokens; tenant tokens that do not hold are refused in the OpenAI error shape."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import openai
import pytest
import redis
from proxy_support import (
    ProxyFactory,
    ReplicaFactory,
    chat,
    metric,
    upstreams_of,
)
from waiting import wait_until

from devstack.procs import Processes, free_port
from devstack.redis_server import start as start_redis
from taskyard.plumbing.keys import proxy_ratelimit
from taskyard.plumbing.tenant_credentials import TenantCredentials

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
        keys = flushed_redis.keys(proxy_ratelimit("shared", 0).rsplit(":", 1)[0] + ":*")
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


def test_spending_survives_a_redis_outage(
    replicas: ReplicaFactory, proxy: ProxyFactory, tmp_path: Path
) -> None:
    port, data = free_port(), tmp_path / "redis"
    with Processes(log_dir=tmp_path) as processes:
        start_redis(processes, "redis", port, data)
        url = f"redis://127.0.0.1:{port}/0"
        px = proxy(upstreams_of(replicas(1)), env=_with_redis(url))
        client = _client(px.base_url, "k-shared")
        processes.stop("redis")
        for _ in range(2):  # spent while Redis is away
            chat(client)
        failed = 'taskyard_proxy_errors_total{kind="redis_sync"}'
        wait_until(lambda: metric(px, failed, absent=0) >= 1)  # a sync failed with it in hand
        start_redis(processes, "redis", port, data)
        with redis.Redis.from_url(url, decode_responses=True) as check:
            window_keys = proxy_ratelimit("shared", 0).rsplit(":", 1)[0] + ":*"
            wait_until(lambda: [check.hget(k, "req") for k in check.keys(window_keys)] == ["2"])


# -- tenant tokens ----------------------------------------------------------------------------

SECRET = "0123456789abcdef" * 3
CREDENTIAL_ENV = {
    "TASKYARD_LLM_TOKEN_SECRET": SECRET,
    "TASKYARD_PROXY_KEYS": "k-direct:0:0:gamma",
    "TASKYARD_PROXY_TENANT_LIMITS": "alpha:0:0,*:1:0",
    "TASKYARD_PROXY_RATE_WINDOW_S": "3600",
}


def _signed(tenant: str, task_id: str = "task-1", **kwargs: object) -> str:
    return TenantCredentials(SECRET, **kwargs).sign(tenant, task_id)  # type: ignore[arg-type]


def _refusal(client: openai.OpenAI, **headers: str) -> tuple[int, dict[str, object]]:
    with pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(
            model="scripted", messages=[{"role": "user", "content": "x"}], extra_headers=headers
        )
    return info.value.status_code, info.value.response.json()


@pytest.fixture
def token_proxy(replicas: ReplicaFactory, proxy: ProxyFactory) -> str:
    return proxy(upstreams_of(replicas(1)), env=CREDENTIAL_ENV).base_url


def test_a_tenant_token_is_counted_and_limited_as_its_tenant(token_proxy: str) -> None:
    alpha = _client(token_proxy, _signed("alpha"))
    for _ in range(3):  # alpha is named without limits
        chat(alpha)
    beta = _client(token_proxy, _signed("beta", "task-b"))
    chat(beta)  # every other tenant: 1 request per window
    status, body = _refusal(beta)
    assert status == 429 and body["error"]["code"] == "rate_limit_exceeded"  # type: ignore[index]
    assert "tenant 'beta'" in body["error"]["message"]  # type: ignore[index]
    chat(_client(token_proxy, _signed("delta", "task-d")))  # its own budget
    chat(_client(token_proxy, "k-direct"))  # plain keys still work beside tokens
    metrics = httpx.get(token_proxy.removesuffix("/v1") + "/metrics").text
    requests = "taskyard_proxy_tenant_requests_total"
    assert f'{requests}{{outcome="admitted",tenant="alpha"}} 3.0' in metrics
    assert f'{requests}{{outcome="rate_limited",tenant="beta"}} 1.0' in metrics
    assert 'taskyard_proxy_tokens_total{kind="prompt",tenant="gamma"}' in metrics


# Credentials are made when the test runs (made at collection, a token could expire first).
Credential = Callable[[], str]


@pytest.mark.parametrize(
    ("credential", "code"),
    [
        (lambda: _signed("alpha")[:-4] + "AAAA", "invalid_api_key"),  # a signature of its own
        (lambda: "tyt1." + _signed("alpha").split(".")[1] + "." + _signed("beta").split(".")[2],
         "invalid_api_key"),  # alpha's claim under beta's signature
        (lambda: TenantCredentials("another-deployment-secret-0123456789").sign("alpha", "t"),
         "invalid_api_key"),
        (lambda: "tyt1.not-a-token", "invalid_api_key"),
        (lambda: _signed("alpha", ttl_s=-1), "token_expired"),
        (lambda: "taskyard", "invalid_api_key"),  # the shared key is no tenant with tokens on
    ],
)  # fmt: skip
def test_a_token_that_does_not_hold_is_401(
    token_proxy: str, credential: Credential, code: str
) -> None:
    status, body = _refusal(_client(token_proxy, credential()))
    error = body["error"]
    assert status == 401 and isinstance(error, dict) and error["message"]
    assert error == {**error, "type": "authentication_error", "param": None, "code": code}
    assert set(error) == {"message", "type", "param", "code"}


@pytest.mark.parametrize(
    ("credential", "headers"),
    [
        (lambda: _signed("alpha", "task-1"), {"X-Task-ID": "task-2"}),  # another task
        (lambda: _signed("alpha"), {"X-Taskyard-Tenant": "beta"}),
        (lambda: "k-direct", {"X-Taskyard-Tenant": "alpha"}),  # a key acts for its own tenant
    ],
)
def test_a_credential_used_for_another_tenant_or_task_is_403(
    token_proxy: str, credential: Credential, headers: dict[str, str]
) -> None:
    status, body = _refusal(_client(token_proxy, credential()), **headers)
    assert status == 403
    assert body["error"]["type"] == "permission_error"  # type: ignore[index]
    assert body["error"]["code"] == "forbidden"  # type: ignore[index]


def test_the_own_task_and_tenant_may_be_named(token_proxy: str) -> None:
    headers = {"X-Task-ID": "task-1", "X-Taskyard-Tenant": "alpha"}
    client = _client(token_proxy, _signed("alpha"))
    client.chat.completions.create(
        model="scripted", messages=[{"role": "user", "content": "x"}], extra_headers=headers
    )


def test_tokens_are_refused_where_no_secret_is_set(
    replicas: ReplicaFactory, proxy: ProxyFactory
) -> None:
    px = proxy(upstreams_of(replicas(1)), env=KEYS)
    status, body = _refusal(_client(px.base_url, _signed("alpha")))
    assert status == 401 and "not accepted" in body["error"]["message"]  # type: ignore[index]
