"""taskyard's own cost per agent step, next to a bare Celery hop on the same Redis.

2-step tasks (the model calls `print(1)`, then answers), scripted model at zero latency,
Docker sandbox. Overhead per step = (task time - 2 model calls - 1 tool call) / 2, with the
model call and the warm sandbox call measured straight in the same run.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
from _celery_floor import measure as celery_floor

from devstack.procs import ROOT
from devstack.stack import LocalStack
from shared.client import TaskyardClient
from shared.sandbox import make_sandbox_provider
from shared.settings import Settings

__all__ = ["overhead_section"]

TASK = "```python\nprint(1)\n```"


def _run_task(client: TaskyardClient, session: str) -> float:
    start = time.perf_counter()
    task_id = client.submit(TASK, session_id=session)["id"]
    for event in client.events(task_id):
        if event.is_final:
            assert event.data["status"] == "succeeded", event.data
    return time.perf_counter() - start


def _client_loop(stack: LocalStack, session: str, count: int) -> list[float]:
    client = TaskyardClient(stack.gateway_url, stack.api_key)
    try:
        _run_task(client, session)  # warm: the session's sandbox starts here
        return [_run_task(client, session) for _ in range(count)]
    finally:
        client.close()


def _model_call_s(stack: LocalStack, samples: int = 200) -> float:
    url = f"http://127.0.0.1:{stack.ports.model}/v1/chat/completions"
    tool = {"type": "function", "function": {"name": "IPythonInterpreter", "parameters": {}}}
    body = {"model": "scripted", "messages": [{"role": "user", "content": TASK}], "tools": [tool]}
    with httpx.Client() as http:
        times = []
        for _ in range(samples):
            start = time.perf_counter()
            http.post(url, json=body).raise_for_status()
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def _tool_call_s(samples: int = 50) -> float:
    provider = make_sandbox_provider(Settings(sandbox_backend="docker"))
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
        runs = list(pool.map(lambda i: _client_loop(stack, f"sat-{i}", per_client), range(clients)))
    return sum(len(r) + 1 for r in runs) / (time.perf_counter() - start)


def overhead_section(quick: bool) -> None:
    tasks, clients = (60, 8) if quick else (200, 16)
    stack = LocalStack(sandbox_backend="docker").start()
    try:
        latencies = _client_loop(stack, "one-client", tasks)
        rate = _saturation(stack, clients, max(4, tasks // clients))
        model_s, tool_s = _model_call_s(stack), _tool_call_s()
        floor = _floor(stack)
    finally:
        stack.stop()
    task_s = statistics.median(latencies)
    overhead_ms = (task_s - 2 * model_s - tool_s) / 2 * 1e3
    print("\n## Overhead: 2-step tasks (`print(1)`), scripted model at 0 ms, Docker sandbox")
    print("| | p50 | tasks/s |")
    print("| --- | --- | --- |")
    print(f"| task, one client ({tasks} tasks) | {task_s * 1e3:.1f} ms | |")
    print(f"| **taskyard overhead per agent step** | **{overhead_ms:.2f} ms** | |")
    print(f"| saturation ({clients} clients, own sessions) | | **{rate:.0f}** |")
    print(f"| model call, straight | {model_s * 1e3:.2f} ms | |")
    print(f"| warm sandbox `print(1)`, straight | {tool_s * 1e3:.2f} ms | |")
    print(f"| bare Celery no-op hop (same Redis) | {floor['p50_ms']:.2f} ms "
          f"(p99 {floor['p99_ms']:.2f}) | {floor['tasks_s']:.0f} |")  # fmt: skip
