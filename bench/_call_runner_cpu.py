"""The tool worker's call runner alone, without Celery: CPU per tool call.

`ToolCallRunner.run_call` (the claim, the cell in a local sandbox, the result with the next
step's job) driven by a plain loop in a process of its own, on the stack's Redis, for tasks
made waiting on a `print(1)` call. Its process's CPU (every thread: the calling one, the store
loop's) is the runner's; the kernel's (its child) is given apart: it is the cell's. Issue 30
measured this at 3.3-4.3 CPU-ms a call and asked for <= 1.

    python bench/_call_runner_cpu.py REDIS_URL CALLS   # prints the figures as JSON
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from _cpu import cpu_s, tree_cpu_s

from devstack.waiting_calls import waiting_on
from services.tool_worker.call_runner import ToolCallRunner
from taskyard.agentkit.schema import ToolCall
from taskyard.plumbing import keys
from taskyard.plumbing.celery_app import make_celery
from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.runtime.jobs import ToolRunJob
from taskyard.runtime.store.sandboxes import ToolWorkerId

__all__ = ["measure"]

WARM_CALLS = 100  # the session's kernel started, the connections open


def measure(redis_url: str, calls: int) -> dict[str, float]:
    """{"runner_ms", "kernel_ms", "wall_ms"} per call, from a process of its own."""
    argv = [sys.executable, str(Path(__file__)), redis_url, str(calls)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=True)
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def _main(redis_url: str, calls: int) -> None:
    settings = ToolWorkerSettings(
        redis_url=f"{redis_url}/0", broker_url=f"{redis_url}/5", sandbox_backend="local",
        sandbox_warm_pool=0, sandbox_worker_label=f"bench-runner-{os.getpid()}",
    )  # fmt: skip
    runner = ToolCallRunner.open(
        settings, ToolWorkerId(settings.sandbox_worker_label), make_celery(settings)
    )
    try:
        alive = runner.store.r.set(keys.tool_worker_alive(runner.me.node), "run", ex=600)
        runner.loop.run(alive)
        jobs = [_waiting(runner, i) for i in range(WARM_CALLS + calls)]
        for job in jobs[:WARM_CALLS]:
            runner.run_call(job)
        me = os.getpid()
        kernel, cpu, wall = tree_cpu_s(me) - cpu_s(me), time.process_time(), time.perf_counter()
        for job in jobs[WARM_CALLS:]:
            runner.run_call(job)
        kernel = tree_cpu_s(me) - cpu_s(me) - kernel
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    finally:
        runner.tools.close()
        runner.loop.run(runner.store.close())
        runner.loop.close()
    per_call = {"runner_ms": cpu, "kernel_ms": kernel, "wall_ms": wall}
    print(json.dumps({name: value * 1000 / calls for name, value in per_call.items()}))


def _waiting(runner: ToolCallRunner, index: int) -> ToolRunJob:
    """A task whose step 0 called `print(1)` and waits for its result, and the call's job."""
    call = ToolCall(id=f"c{index}", name="IPythonInterpreter", parameters={"command": "print(1)"})
    return runner.loop.run(waiting_on(runner.store, call, "bench", "runner"))


if __name__ == "__main__":
    _main(sys.argv[1], int(sys.argv[2]))
