"""A store call's CPU on the client's side, measured apart from the stack (issue 30).

On a Redis of its own (no persistence, a free port), the calling thread's CPU per call over
`--calls` sequential calls on uvloop, the median (and range) of 5 runs after a warm-up:

- a store command: an EVALSHA of 10 keys and a 1.2 KB document through the store's client
  (its pool, retry and packing), a one-`GET` script;
- `begin_step` of a step not current: the script, its reply decoded, the task's record built;
- `TaskRecord.from_redis` alone (a task with a spec and a pending call).

    .venv/bin/python bench/store_client_bench.py

The machine's load moves these: compare trees alternated (`PYTHONPATH=<tree>/shared`).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from devstack import redis_server
from devstack.procs import Processes, free_port
from taskyard.agentkit.schema import ToolCall
from taskyard.agentkit.spec import AgentSpec
from taskyard.runtime.store import TaskStore
from taskyard.runtime.task import TaskRecord

RUNS = 5
KEYS = [f"task:task_{i:032x}:bench" for i in range(10)]
DOC = "x" * 1200


def _thread_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_THREAD)
    return usage.ru_utime + usage.ru_stime


def _record() -> TaskRecord:
    spec = AgentSpec(system_prompt="Be brief.", tools=["IPythonInterpreter"], max_steps=6)
    call = ToolCall(id="c1", name="IPythonInterpreter", parameters={"command": "print(1)"})
    return TaskRecord(tenant="acme", session_id=uuid.uuid4().hex, input="print(1)", spec=spec,
                      step=1, deadline_s=600.0, pending_calls=[call])  # fmt: skip


async def _per_call_us(call: Callable[[], Awaitable[object]], calls: int) -> list[float]:
    """CPU microseconds a call, one figure a run."""
    for _ in range(calls // 10):
        await call()
    runs = []
    for _ in range(RUNS):
        started = _thread_cpu_s()
        for _ in range(calls):
            await call()
        runs.append((_thread_cpu_s() - started) / calls * 1e6)
    return runs


def _sync_per_call_us(call: Callable[[], object], calls: int) -> list[float]:
    runs = []
    for _ in range(RUNS + 1):  # the first warms up
        started = _thread_cpu_s()
        for _ in range(calls):
            call()
        runs.append((_thread_cpu_s() - started) / calls * 1e6)
    return runs[1:]


def _show(name: str, runs: list[float]) -> None:
    print(f"{name}: {statistics.median(runs):.1f} CPU-us a call ({min(runs):.1f}-{max(runs):.1f})")


async def _measure(url: str, calls: int) -> None:
    store = TaskStore.from_url(f"{url}/0", f"{url}/1")
    try:
        sha = await store.r.script_load("return redis.call('GET', KEYS[1])")
        command = lambda: store.r.evalsha(sha, len(KEYS), *KEYS, DOC, str(time.time()))  # noqa: E731
        _show("a store command (EVALSHA, 10 keys, 1.2 KB)", await _per_call_us(command, calls))
        record = _record()
        await store.create(record)
        begin = lambda: store.begin_step(  # noqa: E731  # step 5 is not current: a read
            record.id, 5, record.tenant, record.session_id, {"memory": 0}, "0"
        )
        _show("begin_step, a step not current", await _per_call_us(begin, calls))
        fields = record.to_redis()
        _show(
            "TaskRecord.from_redis", _sync_per_call_us(lambda: TaskRecord.from_redis(fields), calls)
        )
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls a run")
    args = parser.parse_args()
    with Processes() as procs, tempfile.TemporaryDirectory() as data:
        port = free_port()
        redis_server.start(procs, "redis", port, Path(data))
        uvloop.run(_measure(f"redis://{redis_server.LOOPBACK}:{port}", args.calls))


if __name__ == "__main__":
    main()
