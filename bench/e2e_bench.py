"""taskyard's own overhead per agent step, end to end.

Starts the local stack (scripted model at zero latency, Docker sandbox), warms one session per
client, then runs many tasks whose tool call is a trivial `print(1)` from a few concurrent clients.
In the same run it measures the parts taskyard does not own, straight: one scripted-model call
and one warm sandbox call. Overhead per step = (task time - 2 model calls - 1 tool call) / 2 steps.

    .venv/bin/python bench/e2e_bench.py [--tasks 300] [--clients 4] [--sandbox docker]
"""

from __future__ import annotations

import argparse
import signal
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from services.stack import LocalStack
from shared.client import TaskyardClient
from shared.sandbox import make_sandbox_provider
from shared.settings import Settings

TASK = "```python\nprint(1)\n```"
STEPS_PER_TASK = 2  # a tool call, then the final answer


def run_task(client: TaskyardClient, session: str) -> float:
    start = time.perf_counter()
    task_id = client.submit(TASK, session_id=session)["id"]
    for event in client.events(task_id):
        if event.is_final:
            assert event.data["status"] == "succeeded", event.data
    return time.perf_counter() - start


def client_loop(stack: LocalStack, session: str, count: int) -> list[float]:
    client = TaskyardClient(stack.gateway_url, stack.api_key)
    run_task(client, session)  # warm: the session's sandbox starts here
    return [run_task(client, session) for _ in range(count)]


def model_call_s(stack: LocalStack, samples: int = 200) -> float:
    url = f"http://127.0.0.1:{stack.ports.model}/v1/chat/completions"
    body = {
        "model": "scripted",
        "messages": [{"role": "user", "content": TASK}],
        "tools": [
            {
                "type": "function",
                "function": {"name": "IPythonInterpreter", "parameters": {"type": "object"}},
            }
        ],
    }
    with httpx.Client() as http:
        times = []
        for _ in range(samples):
            start = time.perf_counter()
            http.post(url, json=body).raise_for_status()
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def tool_call_s(backend: str, samples: int = 50) -> float:
    provider = make_sandbox_provider(Settings(sandbox_backend=backend))
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


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--sandbox", default="docker", choices=["docker", "local"])
    parser.add_argument("--max-seconds", type=float, default=600)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _stop)  # `timeout` and CI stop the stack like Ctrl-C does
    stack = LocalStack(sandbox_backend=args.sandbox).start()
    try:
        per_client = args.tasks // args.clients
        start = time.perf_counter()
        with ThreadPoolExecutor(args.clients) as pool:
            runs = pool.map(
                lambda i: client_loop(stack, f"bench-{i}", per_client), range(args.clients)
            )
            latencies = [t for run in runs for t in run]
        wall = time.perf_counter() - start
        model_s, tool_s = model_call_s(stack), tool_call_s(args.sandbox)
    finally:
        stack.stop()
    task_s = statistics.median(latencies)
    overhead = (task_s - 2 * model_s - tool_s) / STEPS_PER_TASK
    print(
        f"tasks: {len(latencies)} from {args.clients} clients, sandbox {args.sandbox}, "
        f"scripted model at zero latency"
    )
    print(f"throughput: {len(latencies) / wall:.1f} tasks/s (wall {wall:.1f} s, incl. warm-up)")
    print(
        f"task latency: median {task_s * 1e3:.1f} ms, "
        f"p90 {statistics.quantiles(latencies, n=10)[-1] * 1e3:.1f} ms"
    )
    print(
        f"baseline, same run: model call {model_s * 1e3:.2f} ms, "
        f"warm sandbox print(1) {tool_s * 1e3:.2f} ms (medians)"
    )
    print(f"taskyard overhead per agent step: {overhead * 1e3:.1f} ms (median-based)")


if __name__ == "__main__":
    main()
