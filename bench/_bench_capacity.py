"""What one more host buys: the capacity model, measured.

A fixed workload of two-step tasks (a tool call, then the answer: two agent steps and one
tool call each) runs through the local stack. Around it, each service's CPU time is read from
/proc (its process tree: a local-backend sandbox counts toward its tool worker) and Redis's
own from INFO (its CPU and every command's calls), so each figure is per agent step:

- CPU-ms per step of the gateway, the agent worker, the LLM proxy and the tool worker (the
  scripted model is printed too, as the stand-in it is: a real model's cost is the GPU's);
- Redis commands and Redis CPU-microseconds per step;
- from them: the steps/s one core of each service carries, what one Redis primary carries,
  and how many agent cores it takes before Redis is the limit.

What the services spend idle (pollers, heartbeats, the sweep) is measured first, for as long as
a round, and taken off each round's figures: the table is the marginal cost of a step.

The sandboxes are the local backend's here: their kernels are the tool worker's children, so
the cell's CPU is counted (a Docker sandbox's runs under the engine, out of sight of /proc's
process tree).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import redis
from _cpu import tree_cpu_s
from _stackbench import configure_model, submit_burst

from devstack.stack import LocalStack
from shared import keys

SERVICES = ("gateway", "agent_worker", "proxy", "tool_worker", "model")
STEPS_PER_TASK = 2
TASK = {"input": "```python\nprint(1)\n```"}
SESSIONS = 16  # tasks spread over these (each keeps its sandbox, as sessions do)
TARGET_CPU_MS = 1.5  # per step, across the services (issue 18)
TARGET_TASKS_S = 100.0  # two-step tasks on this machine


@dataclass(frozen=True)
class Idle:
    """What the stack spends per second doing nothing: CPU seconds by service, Redis's CPU
    seconds and commands."""

    cpu_s: dict[str, float]
    redis_s: float
    calls: float


@dataclass(frozen=True)
class Round:
    tasks: int
    seconds: float
    cpu_ms: dict[str, float]  # per step, by service, Redis included
    redis_calls: float  # per step
    redis_us: float  # Redis's own CPU per step, from INFO


def _commands(client: redis.Redis) -> dict[str, int]:
    return {name.removeprefix("cmdstat_"): int(v["calls"])
            for name, v in client.info("commandstats").items()}  # fmt: skip


def _redis_totals(client: redis.Redis) -> tuple[float, float]:
    """(commands served, Redis CPU seconds) so far."""
    calls = sum(_commands(client).values())
    cpu = client.info("cpu")
    return float(calls), float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"])


def _cpu_by_service(stack: LocalStack) -> dict[str, float]:
    return {name: tree_cpu_s(stack.procs[name].pid) for name in SERVICES}


def _wait(client: redis.Redis, ids: list[str], timeout_s: float = 300) -> tuple[float, int]:
    """Until every task succeeded (or failed: an error); when, and the commands this cost
    (a few polls, subtracted from Redis's count: they are the benchmark's, not taskyard's)."""
    waiting, sent = set(ids), 0
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
        sent += len(batch)
    return time.perf_counter(), sent


def _idle(stack: LocalStack, seconds: float) -> Idle:
    client = redis.Redis.from_url(f"{stack.redis_url}/0")
    try:
        cpu_before, (calls_before, redis_before) = _cpu_by_service(stack), _redis_totals(client)
        time.sleep(seconds)
        cpu_after, (calls_after, redis_after) = _cpu_by_service(stack), _redis_totals(client)
    finally:
        client.close()
    return Idle({n: (cpu_after[n] - cpu_before[n]) / seconds for n in SERVICES},
                (redis_after - redis_before) / seconds,
                (calls_after - calls_before - 2) / seconds)  # fmt: skip


def _round(stack: LocalStack, tasks: int, clients: int, idle: Idle) -> Round:
    client = redis.Redis.from_url(f"{stack.redis_url}/0")
    try:
        cpu_before, (calls_before, redis_before) = _cpu_by_service(stack), _redis_totals(client)
        bodies = [{**TASK, "session_id": f"capacity-{i % SESSIONS}"} for i in range(tasks)]
        burst = submit_burst(stack, bodies, connections=clients)
        ended_at, polls = _wait(client, burst.ids)
        cpu_after, (calls_after, redis_after) = _cpu_by_service(stack), _redis_totals(client)
    finally:
        client.close()
    steps, took = tasks * STEPS_PER_TASK, ended_at - burst.started
    per_step = {
        n: (cpu_after[n] - cpu_before[n] - idle.cpu_s[n] * took) * 1000 / steps for n in SERVICES
    }
    redis_s = redis_after - redis_before - idle.redis_s * took
    per_step["redis"] = redis_s * 1000 / steps
    calls = calls_after - calls_before - polls - 2 - idle.calls * took  # 2: the INFOs
    return Round(tasks, took, per_step, calls / steps, redis_s * 1e6 / steps)


def capacity_section(quick: bool) -> None:
    tasks, rounds, clients = (100, 2, 16) if quick else (300, 3, 16)
    print(f"\n## Capacity: {rounds} rounds of {tasks} two-step tasks, {clients} clients "
          "(median per agent step)")  # fmt: skip
    stack = LocalStack(sandbox_backend="local").start()
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
    finally:
        stack.stop()
    _print_model(results)
    steps = sum(r.tasks for r in results) * STEPS_PER_TASK
    top = sorted(mix.items(), key=lambda item: -item[1])[:10]
    print(
        "Redis commands per step, the most frequent (polls and INFO included): "
        + ", ".join(f"{name} {calls / steps:.1f}" for name, calls in top)
    )
    busy = ", ".join(f"{n} {ms * 1000:.0f}" for n, ms in idle.cpu_s.items())
    print(
        f"(taken off as idle, per second: CPU-ms {busy}, Redis {idle.redis_s * 1000:.0f} "
        f"CPU-ms and {idle.calls:.0f} commands)"
    )


def _median(results: list[Round], name: str) -> float:
    return statistics.median(r.cpu_ms[name] for r in results)


def _print_model(results: list[Round]) -> None:
    print("| service | CPU ms / step | steps/s per core |")
    print("| --- | --- | --- |")
    for name in (*SERVICES, "redis"):
        ms = _median(results, name)
        label = "model (scripted stand-in)" if name == "model" else name
        print(f"| {label} | {ms:.3f} | {1000 / ms:,.0f} |")
    ours = sum(_median(results, n) for n in ("gateway", "agent_worker", "proxy", "tool_worker"))
    calls = statistics.median(r.redis_calls for r in results)
    redis_us = statistics.median(r.redis_us for r in results)
    rate = statistics.median(r.tasks / r.seconds for r in results)
    agent_ms = _median(results, "agent_worker")
    redis_steps = 1e6 / redis_us
    print(f"\ntaskyard's services: **{ours:.2f} CPU-ms per step** (target <= {TARGET_CPU_MS});"
          f" Redis: {calls:.1f} commands and {redis_us:.0f} CPU-us per step")  # fmt: skip
    print(
        f"achieved here: {rate:.1f} two-step tasks/s ({rate * STEPS_PER_TASK:.0f} steps/s; "
        f"target >= {TARGET_TASKS_S:.0f} tasks/s), every service on the same 2 cores"
    )
    print(
        f"one agent core carries ~{1000 / agent_ms:,.0f} steps/s; one tool core ~"
        f"{1000 / _median(results, 'tool_worker'):,.0f} tool calls/s (2 steps each)"
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
