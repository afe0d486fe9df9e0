"""Tenants through the whole stack: each model call of a task is the task's tenant's at the
proxy (signed by the agent worker), a tenant past its budget has its limit applied (the task
waits, saying why, or fails with the reason), and a task's usage as GET shows it is what the
proxy counted for its tenant: one record of usage, the agent worker's."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from devstack.stack import LocalStack
from taskyard.client import TaskyardClient
from taskyard.plumbing.tenant_credentials import TenantCredentials

pytestmark = pytest.mark.e2e

KEYS = "key-a=alpha,key-b=beta,key-c=gamma"
QUESTION = "What is 6 * 7? Use Python."  # two model calls: the code, then the answer


def _stack(limits: str, window_s: int) -> LocalStack:
    env = {"TASKYARD_PROXY_TENANT_LIMITS": limits, "TASKYARD_PROXY_RATE_WINDOW_S": str(window_s)}
    return LocalStack(sandbox_backend="local", api_keys=KEYS, extra_env=env).start()


@pytest.fixture(scope="module")
def day_window() -> Iterator[LocalStack]:
    # beta: one model request a day. A day-long window: the test never straddles its end.
    stack = _stack("beta:1:0", 86_400)
    yield stack
    stack.stop()


def _client(stack: LocalStack, key: str) -> TaskyardClient:
    return TaskyardClient(stack.gateway_url, key)


def _finish(client: TaskyardClient, text: str = QUESTION) -> dict:
    task_id = client.submit(text)["id"]
    list(client.events(task_id))
    return client.get(task_id)


def _proxy_metrics(stack: LocalStack) -> dict[tuple[str, ...], float]:
    """The proxy's per-tenant samples: (name, tenant, kind or outcome) to value."""
    text = httpx.get(stack.metrics_urls["proxy"]).text
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if "tenant" in s.labels:
                detail = s.labels.get("kind") or s.labels.get("outcome", "")
                samples[s.name, s.labels["tenant"], detail] = s.value
    return samples


def _proxy_usage(samples: dict[tuple[str, ...], float], tenant: str) -> dict[str, int]:
    return {
        f"{kind}_tokens": int(samples.get(("taskyard_proxy_tokens_total", tenant, kind), 0))
        for kind in ("prompt", "completion")
    }


def _summed(tasks: list[dict]) -> dict[str, int]:
    return {k: sum(t["usage"][k] for t in tasks) for k in ("prompt_tokens", "completion_tokens")}


def test_tasks_are_their_tenants_and_a_spent_budget_fails_with_the_reason(
    day_window: LocalStack,
) -> None:
    alpha, beta = _client(day_window, "key-a"), _client(day_window, "key-b")
    done = [_finish(alpha), _finish(alpha)]
    assert [t["status"] for t in done] == ["succeeded", "succeeded"]
    limited = _finish(beta)
    # beta's first call (the code) was its one request; the answer's call was refused.
    assert limited["status"] == "failed", limited
    assert "rate limit (1 requests per 86400s) of tenant 'beta' reached" in limited["error"]
    assert "longer than a task waits" in limited["error"]
    assert limited["step"] == 1 and limited["usage"]["prompt_tokens"] > 0

    samples = _proxy_metrics(day_window)
    # What each task's GET says it used is what the proxy counted for its tenant.
    assert _proxy_usage(samples, "alpha") == _summed(done)
    assert _proxy_usage(samples, "beta") == _summed([limited])
    requests = "taskyard_proxy_tenant_requests_total"
    assert samples[requests, "alpha", "admitted"] == 4
    assert samples[requests, "beta", "admitted"] == 1
    assert samples[requests, "beta", "rate_limited"] == 1
    assert not any(tenant in ("default", "anonymous") for _, tenant, _ in samples)
    for client in (alpha, beta):
        client.close()


def test_a_sandbox_or_client_cannot_pass_for_another_tenant(day_window: LocalStack) -> None:
    proxy = f"http://127.0.0.1:{day_window.ports.proxy}/v1/chat/completions"
    body = {"model": "scripted", "messages": [{"role": "user", "content": "hi"}]}

    def status(credential: str, **headers: str) -> int:
        auth = {"Authorization": f"Bearer {credential}", **headers}
        return httpx.post(proxy, json=body, headers=auth).status_code

    assert status("taskyard") == 401  # the old shared key is no tenant
    assert status("key-a") == 401  # nor a gateway key
    foreign = TenantCredentials("not-this-deployments-secret-0123456789").sign("alpha", "t")
    assert status(foreign) == 401
    own = TenantCredentials(day_window.token_secret)
    assert status(own.sign("alpha", "t1"), **{"X-Task-ID": "t2"}) == 403
    assert status(own.sign("alpha", "t1"), **{"X-Taskyard-Tenant": "beta"}) == 403
    # The tool worker, where sandboxes run, is never given the secret.
    environ = Path(f"/proc/{day_window.procs['tool_worker'].pid}/environ").read_bytes()
    assert b"TASKYARD_LLM_TOKEN_SECRET" not in environ
    assert day_window.token_secret.encode() not in environ


@pytest.fixture(scope="module")
def short_window() -> Iterator[LocalStack]:
    stack = _stack("gamma:2:0", 5)
    yield stack
    stack.stop()


def test_a_tenant_past_its_budget_waits_saying_why_then_goes_on(short_window: LocalStack) -> None:
    gamma = _client(short_window, "key-c")
    # Start at the top of a rate window, so what follows happens within one.
    time.sleep(5 - time.time() % 5 + 0.05)
    # Another task of gamma's (here: signed by hand) spends the window's two requests.
    token = TenantCredentials(short_window.token_secret).sign("gamma", "task_elsewhere")
    proxy = f"http://127.0.0.1:{short_window.ports.proxy}/v1/chat/completions"
    body = {"model": "scripted", "messages": [{"role": "user", "content": "hi"}]}
    spent = [
        httpx.post(proxy, json=body, headers={"Authorization": f"Bearer {token}"}).json()
        for _ in range(2)
    ]
    task_id = gamma.submit(QUESTION)["id"]
    events = list(gamma.events(task_id))
    task = gamma.get(task_id)
    assert task["status"] == "succeeded", task
    [waited, *_] = [e.data for e in events if e.kind.value == "rate_limited"]
    assert "rate limit (2 requests per 5s) of tenant 'gamma' reached" in waited["reason"]
    assert 0 < waited["retry_in_s"] <= 5
    usage = _proxy_usage(_proxy_metrics(short_window), "gamma")
    direct = _summed([{"usage": answer["usage"]} for answer in spent])
    assert usage == {k: direct[k] + task["usage"][k] for k in usage}
    gamma.close()
