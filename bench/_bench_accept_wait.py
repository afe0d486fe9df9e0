"""What the 202 promise costs: the gateway's accept with Redis WAIT for one replica (the
default under Sentinel) next to the same accept without it, in one run on one Redis.

The stack runs on a primary, a replica and three sentinels; its gateway waits for the replica
(TASKYARD_GATEWAY_ACCEPT_REPLICAS unset, so 1), and a second gateway process on the same
Redis does not (=0). The workers are stopped, so every accepted task stays queued and the
figures are the gateways' (and Redis's). One client posts tasks one after another, taking
turns between the two gateways in rounds, so drift on the shared machine falls on both; then
16 clients (wrk, where installed) load each, taking turns in rounds too.
"""

from __future__ import annotations

import json
import statistics
import time

import httpx
from _wrk import wrk_available, wrk_load

from devstack.procs import free_port
from devstack.stack import LocalStack

__all__ = ["accept_wait_section"]

_NO_WAIT = "gateway_no_wait"
_BODY = {"input": "hi", "agent": {"tools": []}}


def _second_gateway(stack: LocalStack) -> str:
    """The stack's gateway command on a port of its own, without the WAIT; its URL."""
    port = free_port()
    argv = list(stack.argvs["gateway"])
    argv[argv.index("--port") + 1] = str(port)
    env = {**stack.env(), "TASKYARD_GATEWAY_ACCEPT_REPLICAS": "0"}
    child = stack.processes.start(_NO_WAIT, argv, env=env)
    url = f"http://127.0.0.1:{port}"
    child.wait_http(f"{url}/readyz")
    return url


def _latencies(url: str, key: str, posts: int) -> list[float]:
    """Milliseconds per accept, one client, one request after another."""
    found = []
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}) as http:
        for _ in range(posts):
            began = time.perf_counter()
            resp = http.post("/v1/tasks", json=_BODY)
            found.append((time.perf_counter() - began) * 1000)
            assert resp.status_code == 202, resp.text
    return found


def _quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q * 100) - 1]


def accept_wait_section(quick: bool) -> None:
    rounds, posts, seconds = (3, 100, 2) if quick else (6, 250, 3)
    stack = LocalStack(sandbox_backend="local", redis_sentinel=True).start()
    try:
        stack.kill("agent_worker")
        stack.kill("tool_worker")
        urls = {"WAIT for 1 replica (Sentinel's default)": stack.gateway_url,
                "no WAIT (TASKYARD_GATEWAY_ACCEPT_REPLICAS=0)": _second_gateway(stack)}  # fmt: skip
        for url in urls.values():
            _latencies(url, stack.api_key, 50)  # warm-up: connections, scripts, caches
        samples: dict[str, list[float]] = {label: [] for label in urls}
        for _ in range(rounds):
            for label, url in urls.items():
                samples[label] += _latencies(url, stack.api_key, posts)
        loads = {label: [] for label in urls}
        for _ in range(rounds if wrk_available() else 0):
            for label, url in urls.items():
                loads[label].append(_load(url, stack.api_key, seconds))
    finally:
        if _NO_WAIT in stack.procs:
            stack.processes.stop(_NO_WAIT)
        stack.stop()
    print("\n## What a 202 costs: the gateway's accept with and without WAIT (one run)")
    print(f"(primary, replica and three sentinels on loopback; workers stopped; one client, "
          f"{rounds} rounds of {posts} accepts per gateway, taking turns)")  # fmt: skip
    print(f"| accept | p50 | p90 | p99 | tasks/s, 16 clients ({rounds} x {seconds} s, wrk) |")
    print("| --- | --- | --- | --- | --- |")
    for label, values in samples.items():
        print(f"| {label} | **{statistics.median(values):.2f} ms** | "
              f"{_quantile(values, 0.9):.2f} ms | {_quantile(values, 0.99):.2f} ms | "
              f"{_rate(loads[label])} |")  # fmt: skip


def _load(url: str, key: str, seconds: float) -> tuple[float, int]:
    """Tasks accepted per second and errors, 16 wrk clients for `seconds`."""
    request = {"path": "/v1/tasks", "body": json.dumps(_BODY),
               "headers": {"authorization": f"Bearer {key}"}}  # fmt: skip
    result = wrk_load(url, request, 16, seconds)
    return result["rps"], result["errors"]


def _rate(rounds: list[tuple[float, int]]) -> str:
    if not rounds:
        return "n/a (no wrk)"
    rates = [rps for rps, _ in rounds]
    errors = sum(errors for _, errors in rounds)
    return f"{statistics.mean(rates):.0f} ({min(rates):.0f}-{max(rates):.0f}; {errors} errors)"
