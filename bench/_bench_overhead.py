"""taskyard's own cost per agent step, next to a bare Celery hop on the same Redis.

2-step tasks (the model calls `print(1)`, then answers), scripted model at zero latency,
Docker sandbox. Overhead per step = (task time - 2 model calls - 1 tool call) / 2, with the
model call and the warm sandbox call measured straight in the same run. Beside it, issue 30's
targets: the overhead in bare Celery hops (a step is 1.5 jobs, so 1.5 hops is the floor;
target <= 2.25), and two-step tasks/s from 8 clients (target >= 100).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import httpx
import redis
from _bench_capacity import JOBS_PER_STEP, STEPS_PER_TASK, TARGET_TASKS_S
from _celery_floor import measure as celery_floor

from devstack.procs import ROOT
from devstack.stack import LocalStack
from taskyard.client import TaskyardClient
from taskyard.plumbing import keys
from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.plumbing.tenant_credentials import TenantCredentials
from taskyard.sandbox import make_sandbox_provider

__all__ = ["overhead_section"]

TASK = "```python\nprint(1)\n```"
CLIENTS = 8  # the saturation's clients, each a session of its own (issue 30's measure)
TARGET_HOPS = 2.25  # issue 30: the overhead per step, in bare hops (1.5x the floor)


class _Run(NamedTuple):
    task_id: str
    started: float  # wall clock, s
    took_s: float


def _run_task(client: TaskyardClient, session: str) -> _Run:
    started, start = time.time(), time.perf_counter()
    task_id = client.submit(TASK, session_id=session)["id"]
    for event in client.events(task_id):
        if event.is_final:
            assert event.data["status"] == "succeeded", event.data
    return _Run(task_id, started, time.perf_counter() - start)


def _client_loop(stack: LocalStack, session: str, count: int) -> list[_Run]:
    client = TaskyardClient(stack.gateway_url, stack.api_key)
    try:
        _run_task(client, session)  # warm: the session's sandbox starts here
        return [_run_task(client, session) for _ in range(count)]
    finally:
        client.close()


Gaps = list[tuple[str, float]]  # (event, median gap before it, ms), in the stream's order


def _timeline(stack: LocalStack, runs: list[_Run]) -> Gaps:
    """Where a task's time goes: the median gap before each event of its stream (Redis
    stamps each entry's id with its own clock, in ms), from the client's submit on."""
    r = redis.Redis.from_url(f"{stack.redis_url}/0", decode_responses=True)
    gaps: dict[str, list[float]] = {}
    for run in runs:
        previous = run.started * 1e3
        for index, (entry_id, fields) in enumerate(r.xrange(keys.task_events(run.task_id))):
            at = int(entry_id.split("-")[0])
            gaps.setdefault(f"{index} {_label(fields)}", []).append(at - previous)
            previous = at
        gaps.setdefault("the client sees the end", []).append(
            (run.started + run.took_s) * 1e3 - previous
        )
    r.close()
    return [(label, statistics.median(values)) for label, values in gaps.items()]


def _label(fields: dict[str, str]) -> str:
    data = json.loads(fields.get("data") or "{}")
    detail = data.get("status") or data.get("sender") or ""
    return f"{fields.get('kind', '?')} {detail}".strip()


def _model_call_s(stack: LocalStack, through_proxy: bool = False, samples: int = 200) -> float:
    """A model call's p50, to the scripted model straight or through the LLM proxy (with a
    tenant credential, as the agent worker calls it)."""
    url = f"http://127.0.0.1:{stack.ports.model}/v1/chat/completions"
    headers = {}
    if through_proxy:
        url = f"{stack.proxy_url}/v1/chat/completions"
        credential = TenantCredentials(stack.token_secret, 600).sign("bench", "task_bench")
        headers["Authorization"] = f"Bearer {credential}"
    tool = {"type": "function", "function": {"name": "IPythonInterpreter", "parameters": {}}}
    body = {"model": "scripted", "messages": [{"role": "user", "content": TASK}], "tools": [tool]}
    with httpx.Client(headers=headers) as http:
        times = []
        for _ in range(samples):
            start = time.perf_counter()
            http.post(url, json=body).raise_for_status()
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def _tool_call_s(samples: int = 50) -> float:
    provider = make_sandbox_provider(ToolWorkerSettings(sandbox_backend="docker"))
    try:
        sandbox = provider.get("bench:direct")
        sandbox.run("print(1)", 10)
        times = []
        for _ in range(samples):
            start = time.perf_counter()
            sandbox.run("print(1)", 10)
            times.append(time.perf_counter() - start)
        return statistics.median(times)
    finally:
        provider.close_all()


def _floor(stack: LocalStack) -> dict[str, float]:
    worker = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "_celery_floor.py"), "worker", stack.redis_url],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        time.sleep(3)  # the worker connects
        return celery_floor(stack.redis_url)
    finally:
        worker.terminate()
        worker.wait(timeout=30)


def _saturation(stack: LocalStack, clients: int, per_client: int) -> float:
    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        done = list(pool.map(lambda i: _client_loop(stack, f"sat-{i}", per_client), range(clients)))
    return sum(len(r) + 1 for r in done) / (time.perf_counter() - start)


def overhead_section(quick: bool) -> None:
    tasks, burst = (60, 64) if quick else (200, 300)
    stack = LocalStack(sandbox_backend="docker").start()
    try:
        runs = _client_loop(stack, "one-client", tasks)
        where = _timeline(stack, runs)
        rate = _saturation(stack, CLIENTS, burst // CLIENTS)
        model_s, tool_s = _model_call_s(stack), _tool_call_s()
        proxied_s = _model_call_s(stack, through_proxy=True)
        floor = _floor(stack)
    finally:
        stack.stop()
    task_s = statistics.median(run.took_s for run in runs)
    overhead_ms = (task_s - 2 * model_s - tool_s) / 2 * 1e3
    print("\n## Overhead: 2-step tasks (`print(1)`), scripted model at 0 ms, Docker sandbox")
    print("| | p50 | tasks/s |")
    print("| --- | --- | --- |")
    print(f"| task, one client ({tasks} tasks) | {task_s * 1e3:.1f} ms | |")
    hops = overhead_ms / floor["p50_ms"]
    print(f"| **taskyard overhead per agent step** | **{overhead_ms:.2f} ms = {hops:.2f} bare "
          f"hops** (floor {JOBS_PER_STEP:g}, target <= {TARGET_HOPS:g}) | |")  # fmt: skip
    print(f"| saturation ({CLIENTS} clients, own sessions; target >= {TARGET_TASKS_S:.0f}) | | "
          f"**{rate:.0f}** |")  # fmt: skip
    print(f"| model call, straight | {model_s * 1e3:.2f} ms | |")
    print(f"| model call through the LLM proxy | {proxied_s * 1e3:.2f} ms | |")
    print(f"| warm sandbox `print(1)`, straight | {tool_s * 1e3:.2f} ms | |")
    print(f"| bare Celery no-op hop (same Redis) | {floor['p50_ms']:.2f} ms "
          f"(p99 {floor['p99_ms']:.2f}) | {floor['tasks_s']:.0f} |")  # fmt: skip
    print("\nWhere one task's time goes (one client; median gap before each event, ms, as Redis")
    print("stamped the events; 1 ms resolution):")
    print("| event | gap p50 |")
    print("| --- | --- |")
    for label, gap in where:
        print(f"| {label} | {gap:.1f} ms |")
    _print_parts(overhead_ms, floor["p50_ms"], proxied_s - model_s, where)


def _print_parts(overhead_ms: float, hop_ms: float, proxy_s: float, where: Gaps) -> None:
    """The overhead per step split into what the path holds besides the steps' own work:
    Celery's 1.5 hops, the LLM proxy's hop (one model call a step) and the gateway's part (a
    task's submit until its first event, and its last event until the client sees it: half
    of it a step)."""
    gaps = dict(where)
    gateway_ms = (gaps[where[0][0]] + gaps["the client sees the end"]) / STEPS_PER_TASK
    hops_ms, proxy_ms = JOBS_PER_STEP * hop_ms, proxy_s * 1e3
    rest_ms = overhead_ms - hops_ms - proxy_ms - gateway_ms
    fixed = (hops_ms + proxy_ms + gateway_ms) / hop_ms
    print(f"\nThe overhead per step, {overhead_ms:.2f} ms: Celery's {JOBS_PER_STEP:g} bare hops "
          f"{hops_ms:.2f} ms, the LLM proxy's hop {proxy_ms:.2f} ms, the gateway's part "
          f"{gateway_ms:.2f} ms (the submit's and the end's gaps above, half a task's), the "
          f"steps' own work the rest, {rest_ms:.2f} ms; the first three alone are {fixed:.2f} "
          f"bare hops (target {TARGET_HOPS:g} for all)")  # fmt: skip
