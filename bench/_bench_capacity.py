"""What one more host buys: the capacity model, measured.

A fixed workload of two-step tasks (a tool call, then the answer: two agent steps and one
tool call each) runs through the local stack. Around it, each service's CPU time is read from
/proc (its process tree: a local-backend sandbox counts toward its tool worker) and Redis's
own from INFO (its CPU and every command's calls), so each figure is per agent step:

- CPU-ms per step of the gateway, the agent worker, the LLM proxy and the tool worker (the
  scripted model is printed too, as the stand-in it is: a real model's cost is the GPU's);
- of the agent and tool workers, their main thread's share (Celery's consumer: receiving,
  the unacked record, the ack; the agent worker's job greenlets too) and the rest's (the
  event loop thread: store scripts, the model call, the agent; the tool worker's pool
  threads and its sandboxes);
- Redis commands and Redis CPU-microseconds per step;
- from them: the steps/s one core of each service carries, what one Redis primary carries,
  and how many agent cores it takes before Redis is the limit;
- each beside the floor, a bare no-op Celery job in taskyard's Celery configuration measured
  in the same run, in each worker's own pool (the agent worker's gevent, the tool worker's
  threads; a step is 1.5 jobs: its own, half a tool call's), and the targets of issue 30:
  taskyard's own CPU (the services less the floor) <= 2.5 ms a step, Redis <= 40 commands a
  step, the tool worker <= 1 ms a call above its job's floor;
- the tool worker's call runner alone, without Celery (`_call_runner_cpu.py`), as issue 30
  first measured it.

What the services spend idle (pollers, heartbeats, the sweep) is measured first, for as long as
a round, and taken off each round's figures: the table is the marginal cost of a step.

The sandboxes are the local backend's here: their kernels are the tool worker's children, so
the cell's CPU is counted (a Docker sandbox's runs under the engine, out of sight of /proc's
process tree).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import NamedTuple

import redis
from _call_runner_cpu import measure as call_runner_cpu
from _celery_floor import drain
from _cpu import main_thread_cpu_s, switches, tree_cpu_s
from _stackbench import configure_model, submit_burst

from devstack.procs import ROOT
from devstack.stack import LocalStack
from taskyard.plumbing import keys

SERVICES = ("gateway", "agent_worker", "proxy", "tool_worker", "model")
# Where in these the CPU goes: their main thread (Celery's consumer; the agent worker's job
# greenlets too) and the rest (the event loop thread, the tool worker's pool threads).
SPLIT = ("agent_worker", "tool_worker")
STEPS_PER_TASK = 2
TASK = {"input": "```python\nprint(1)\n```"}
SESSIONS = 16  # tasks spread over these (each keeps its sandbox, as sessions do)
# Issue 30's targets: taskyard's own CPU per step (the four services less the Celery floor),
# Redis commands per step, the tool worker's CPU per call above its job's floor.
TARGET_OWN_MS = 2.5
TARGET_COMMANDS = 40.0
TARGET_CALL_MS = 1.0
TARGET_TASKS_S = 100.0  # two-step tasks on this machine
JOBS_PER_STEP = 1.5  # Celery jobs: the step's own, and half a tool call's (one per two steps)
# Bare jobs the floor is measured over: /proc counts CPU in 10 ms ticks (0.01 ms a job here).
FLOOR_JOBS = 1000
RUNNER_CALLS = 1000  # tool calls of the call runner alone, without Celery


class RedisTotals(NamedTuple):
    """What Redis served: commands, CPU seconds, and round trips (the reads of clients'
    requests it processed: a pipeline's commands are one)."""

    calls: float
    cpu_s: float
    reads: float

    def scaled(self, by: float) -> RedisTotals:
        return RedisTotals(*(value * by for value in self))

    def minus(self, other: RedisTotals) -> RedisTotals:
        return RedisTotals(*(a - b for a, b in zip(self, other, strict=True)))


def _served(before: RedisTotals, after: RedisTotals) -> RedisTotals:
    """What Redis served between two totals, less the INFO that read the later one (its read
    and, once it ran, the earlier INFO's command are in the later totals)."""
    calls, cpu_s, reads = (a - b for a, b in zip(after, before, strict=True))
    return RedisTotals(calls - 1, cpu_s, reads - 1)


@dataclass(frozen=True)
class Idle:
    """What the stack spends per second doing nothing: CPU seconds by service, and Redis's."""

    cpu_s: dict[str, float]
    redis: RedisTotals  # per second
    switches: dict[str, float]  # per second, by service


@dataclass(frozen=True)
class Round:
    tasks: int
    seconds: float
    cpu_ms: dict[str, float]  # per step, by service, Redis included
    switches: dict[str, float]  # context switches per step, by service (its process)
    redis_calls: float  # per step
    redis_us: float  # Redis's own CPU per step, from INFO
    redis_reads: float  # round trips per step


def _commands(client: redis.Redis) -> dict[str, int]:
    return {name.removeprefix("cmdstat_"): int(v["calls"])
            for name, v in client.info("commandstats").items()}  # fmt: skip


def _redis_totals(client: redis.Redis) -> RedisTotals:
    """What Redis served so far, read with one INFO."""
    info = client.info("all")
    calls = sum(int(v["calls"]) for k, v in info.items() if k.startswith("cmdstat_"))
    cpu_s = float(info["used_cpu_sys"]) + float(info["used_cpu_user"])
    return RedisTotals(float(calls), cpu_s, float(info["total_reads_processed"]))


class _Counters(NamedTuple):
    """What the stack has spent so far: CPU seconds by service (and its main thread's), what
    Redis served, context switches by service."""

    cpu_s: dict[str, float]
    redis: RedisTotals
    switches: dict[str, float]


def _counters(stack: LocalStack, client: redis.Redis) -> _Counters:
    pids = {name: stack.procs[name].pid for name in SERVICES}
    cpu = {name: tree_cpu_s(pid) for name, pid in pids.items()}
    cpu |= {f"{name}:main": main_thread_cpu_s(pids[name]) for name in SPLIT}
    switched = {name: float(switches(pid)) for name, pid in pids.items()}
    return _Counters(cpu, _redis_totals(client), switched)


def _spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {name: after[name] - before[name] for name in after}


def _wait(client: redis.Redis, ids: list[str], timeout_s: float = 300) -> tuple[float, RedisTotals]:
    """Until every task succeeded (or failed: an error); when, and the commands and round
    trips this cost (a few polls, subtracted from Redis's: they are the benchmark's)."""
    waiting, sent, polls = set(ids), 0, 0
    deadline = time.perf_counter() + timeout_s
    while waiting:
        assert time.perf_counter() < deadline, f"{len(waiting)} tasks never ended"
        time.sleep(0.25)
        batch = list(waiting)
        pipe = client.pipeline(transaction=False)
        for task_id in batch:
            pipe.hget(keys.task(task_id), "status")
        for task_id, status in zip(batch, pipe.execute(), strict=True):
            assert status not in (b"failed", b"cancelled", b"timed_out"), (task_id, status)
            if status == b"succeeded":
                waiting.discard(task_id)
        sent, polls = sent + len(batch), polls + 1
    return time.perf_counter(), RedisTotals(sent, 0.0, polls)


def _idle(stack: LocalStack, seconds: float) -> Idle:
    client = redis.Redis.from_url(f"{stack.redis_url}/0")
    try:
        before = _counters(stack, client)
        time.sleep(seconds)
        after = _counters(stack, client)
    finally:
        client.close()
    cpu, switched = _spent(before.cpu_s, after.cpu_s), _spent(before.switches, after.switches)
    return Idle({n: spent / seconds for n, spent in cpu.items()},
                _served(before.redis, after.redis).scaled(1 / seconds),
                {n: spent / seconds for n, spent in switched.items()})  # fmt: skip


def _round(stack: LocalStack, tasks: int, clients: int, idle: Idle) -> Round:
    client = redis.Redis.from_url(f"{stack.redis_url}/0")
    try:
        before = _counters(stack, client)
        bodies = [{**TASK, "session_id": f"capacity-{i % SESSIONS}"} for i in range(tasks)]
        burst = submit_burst(stack, bodies, connections=clients)
        ended_at, polls = _wait(client, burst.ids)
        after = _counters(stack, client)
    finally:
        client.close()
    steps, took = tasks * STEPS_PER_TASK, ended_at - burst.started
    cpu, switched = _spent(before.cpu_s, after.cpu_s), _spent(before.switches, after.switches)
    per_step = {n: (spent - idle.cpu_s[n] * took) * 1000 / steps for n, spent in cpu.items()}
    served = _served(before.redis, after.redis).minus(polls).minus(idle.redis.scaled(took))
    calls, redis_s, reads = served.scaled(1 / steps)
    per_step["redis"] = redis_s * 1000
    switches_per_step = {n: (spent - idle.switches[n] * took) / steps
                         for n, spent in switched.items()}  # fmt: skip
    return Round(tasks, took, per_step, switches_per_step, calls, redis_s * 1e6, reads)


@dataclass(frozen=True)
class Floor:
    """What a bare no-op Celery job costs, run as a worker runs its jobs (taskyard's Celery
    configuration, the worker's pool, no result): the worker's CPU-ms, Redis's CPU-us, commands
    and round trips."""

    cpu_ms: float
    redis_us: float
    calls: float
    reads: float
    switches: float  # the worker's context switches


# The floor's worker under gevent, as `celery worker -P gevent` patches the process first.
_GEVENT_WORKER = (
    "from gevent import monkey; monkey.patch_all(); import runpy, sys; "
    "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


def _celery_floor(stack: LocalStack, jobs: int, pool: str, concurrency: int) -> Floor:
    """A bare job's cost in a worker of `pool` and `concurrency`, as a service runs its jobs."""
    script = str(ROOT / "bench" / "_celery_floor.py")
    patched = ["-c", _GEVENT_WORKER] if pool == "gevent" else []
    argv = [sys.executable, *patched, script, "worker", stack.redis_url, pool, str(concurrency),
            "taskyard"]  # fmt: skip
    worker = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)  # fmt: skip
    client = redis.Redis.from_url(f"{stack.redis_url}/0")
    try:
        drain(stack.redis_url, 50)  # warm: connected, consuming
        cpu, redis_before = tree_cpu_s(worker.pid), _redis_totals(client)
        switched = switches(worker.pid)
        drain(stack.redis_url, jobs)
        cpu_after, redis_after = tree_cpu_s(worker.pid), _redis_totals(client)
        switched_after = switches(worker.pid)
    finally:
        client.close()
        worker.terminate()
        worker.wait(timeout=30)
    # the sends are the benchmark's (a step's jobs are sent by the service before it)
    calls, redis_s, reads = _served(redis_before, redis_after).scaled(1 / jobs)
    return Floor((cpu_after - cpu) * 1000 / jobs, redis_s * 1e6, calls, reads,
                 (switched_after - switched) / jobs)  # fmt: skip


def capacity_section(quick: bool) -> None:
    tasks, rounds, clients = (100, 2, 16) if quick else (300, 3, 16)
    print(f"\n## Capacity: {rounds} rounds of {tasks} two-step tasks, {clients} clients "
          "(median per agent step)")  # fmt: skip
    stack = LocalStack(sandbox_backend="local").start()
    # Each worker's pool, as the stack runs it (the tool worker's is always threads).
    pools = {"agent_worker": (stack.agent_pool, stack.agent_concurrency),
             "tool_worker": ("threads", stack.tool_concurrency)}  # fmt: skip
    try:
        configure_model(stack, latency_ms=0)
        idle = _idle(stack, 1.0)
        _round(stack, 2 * SESSIONS, 4, idle)  # warm: sandboxes, live agents, connections
        time.sleep(3)  # the warm pool refilled
        idle = _idle(stack, 10.0)
        client = redis.Redis.from_url(f"{stack.redis_url}/0")
        before = _commands(client)
        results = [_round(stack, tasks, clients, idle) for _ in range(rounds)]
        mix = {n: c - before.get(n, 0) for n, c in _commands(client).items()}
        client.close()
        floors = {name: _celery_floor(stack, FLOOR_JOBS, *pool) for name, pool in pools.items()}
        runner = call_runner_cpu(stack.redis_url, RUNNER_CALLS)
    finally:
        stack.stop()
    for name, (pool, concurrency) in pools.items():
        floor = floors[name]
        print(f"the floor, a bare no-op Celery job as the {name} runs its jobs (taskyard's Celery "
              f"configuration, {pool} -c {concurrency}; {FLOOR_JOBS} jobs): {floor.cpu_ms:.3f} "
              f"CPU-ms in its worker, {floor.switches:.1f} context switches, Redis "
              f"{floor.calls:.1f} commands in {floor.reads:.1f} round trips and "
              f"{floor.redis_us:.0f} CPU-us (the sends included)")  # fmt: skip
    print(f"a step is {JOBS_PER_STEP} jobs (its own, half a tool call's)")
    _print_model(results, floors)
    print(f"the tool worker's call runner alone, without Celery (`run_call` in a process of its "
          f"own on a local sandbox, {RUNNER_CALLS} calls, the runner's threads): "
          f"**{runner['runner_ms']:.2f} CPU-ms per call** (target <= {TARGET_CALL_MS}; issue 30 "
          f"found 3.3-4.3), the cell's kernel {runner['kernel_ms']:.2f} more, "
          f"{runner['wall_ms']:.2f} ms of wall time")  # fmt: skip
    steps = sum(r.tasks for r in results) * STEPS_PER_TASK
    top = sorted(mix.items(), key=lambda item: -item[1])[:10]
    print(
        "Redis commands per step, the most frequent (polls and INFO included): "
        + ", ".join(f"{name} {calls / steps:.1f}" for name, calls in top)
    )
    busy = ", ".join(f"{n} {idle.cpu_s[n] * 1000:.0f}" for n in SERVICES)
    print(
        f"(taken off as idle, per second: CPU-ms {busy}, Redis {idle.redis.cpu_s * 1000:.0f} "
        f"CPU-ms and {idle.redis.calls:.0f} commands)"
    )


def _median(results: list[Round], name: str) -> float:
    return statistics.median(r.cpu_ms[name] for r in results)


# Celery jobs per agent step each service runs (its floor: that many bare jobs' CPU).
_JOBS = {"agent_worker": 1.0, "tool_worker": JOBS_PER_STEP - 1.0}


def _print_model(results: list[Round], floors: dict[str, Floor]) -> None:
    """The table and the targets; `floors`: each worker's bare job, in its own pool (Redis's
    and the commands' from the agent worker's: a job's commands are the same in either)."""
    floor, tool_floor = floors["agent_worker"], floors["tool_worker"]
    print("| service | CPU ms / step | its Celery floor | steps/s per core "
          "| context switches / step (floor) |")  # fmt: skip
    print("| --- | --- | --- | --- | --- |")
    for name in (*SERVICES, "redis"):
        ms = _median(results, name)
        label = "model (scripted stand-in)" if name == "model" else name
        jobs, own = _JOBS.get(name, 0.0), floors.get(name, floor)
        base = f"{jobs * own.cpu_ms:.3f} ({jobs:g} job)" if jobs else "-"
        if name == "redis":
            base = f"{JOBS_PER_STEP * floor.redis_us / 1000:.3f} ({JOBS_PER_STEP:g} jobs)"
        switched = "-"
        if name != "redis":
            switched = f"{statistics.median(r.switches[name] for r in results):.1f}"
            switched += f" ({jobs * own.switches:.1f})" if jobs else ""
        print(f"| {label} | {ms:.3f} | {base} | {1000 / ms:,.0f} | {switched} |")
    for name in SPLIT:
        main = _median(results, f"{name}:main")
        print(f"| {name}: main thread / the others | {main:.3f} / "
              f"{_median(results, name) - main:.3f} | | | |")  # fmt: skip
    ours = sum(_median(results, n) for n in ("gateway", "agent_worker", "proxy", "tool_worker"))
    calls = statistics.median(r.redis_calls for r in results)
    reads = statistics.median(r.redis_reads for r in results)
    redis_us = statistics.median(r.redis_us for r in results)
    rate = statistics.median(r.tasks / r.seconds for r in results)
    agent_ms = _median(results, "agent_worker")
    redis_steps = 1e6 / redis_us
    bound = sum(jobs * floors[name].cpu_ms for name, jobs in _JOBS.items())
    per_call = _median(results, "tool_worker") * STEPS_PER_TASK
    print(f"\ntaskyard's services: {ours:.2f} CPU-ms per step, the Celery floor {bound:.2f} of "
          f"it: **taskyard's own {ours - bound:.2f} CPU-ms per step** (target <= "
          f"{TARGET_OWN_MS})")  # fmt: skip
    floor_calls = JOBS_PER_STEP * floor.calls
    print(f"Redis: **{calls:.1f} commands per step** (target <= {TARGET_COMMANDS:.0f}; the "
          f"floor's {floor_calls:.1f} of them) in {reads:.1f} round trips (the floor's "
          f"{JOBS_PER_STEP * floor.reads:.1f}), and {redis_us:.0f} CPU-us")  # fmt: skip
    print(f"the tool worker: {per_call:.2f} CPU-ms per call, the sandbox's kernel included; "
          f"**{per_call - tool_floor.cpu_ms:.2f} above its job's floor** "
          f"({tool_floor.cpu_ms:.2f}; "
          f"target <= {TARGET_CALL_MS})")  # fmt: skip
    print(
        f"achieved here: {rate:.1f} two-step tasks/s ({rate * STEPS_PER_TASK:.0f} steps/s; "
        f"target >= {TARGET_TASKS_S:.0f} tasks/s), every service on the same 2 cores"
    )
    print(
        f"one agent core carries ~{1000 / agent_ms:,.0f} steps/s; one tool core ~"
        f"{1000 / _median(results, 'tool_worker') / STEPS_PER_TASK:,.0f} tool calls/s (one per "
        f"{STEPS_PER_TASK} steps)"
    )
    print(
        f"one Redis primary (one core) carries ~{redis_steps:,.0f} steps/s: it is the limit "
        f"past ~{redis_steps * agent_ms / 1000:.0f} agent cores (and as many gateway, proxy "
        f"and tool cores as their rows say)"
    )
    print(
        f"(measured {time.strftime('%Y-%m-%d')}; {SESSIONS} sessions, local sandboxes; "
        "scripted model at 0 ms)"
    )
