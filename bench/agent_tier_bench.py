"""The agent tier at scale, in one run: model calls in flight, taskyard's overhead per step
next to a bare Celery hop, step cost along a long workflow, the gateway, how fast new
sessions get a sandbox under a burst (the warm pool), a workload with every service on a
host of its own next to the same on loopback, the capacity model (CPU per step in each
service and in Redis, what one more core or host buys), what the gateway's 202 promise
costs (its accept waiting for a Redis replica), the sandbox under runc and under gVisor side
by side (and what the host's kernel sees of a cell under each), and a sandbox's hand-off
between tool workers.

Every figure comes from this run on this machine; the old configuration (the agent worker
on Celery's threads pool, -c 16) runs beside the new one (gevent, -c 1000).

    .venv/bin/python bench/agent_tier_bench.py
        [--only inflight,overhead,long,gateway,warmpool,hosts,capacity,acceptwait,runtimes,
                handoff,syscalls] [--quick]
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _bench_accept_wait import accept_wait_section
from _bench_capacity import capacity_section
from _bench_gateway import gateway_section
from _bench_hosts import hosts_section
from _bench_long import long_section
from _bench_overhead import overhead_section
from _bench_syscalls import syscall_section
from _bench_warm_pool import warm_pool_section
from _stackbench import configure_model, peak_rss_kb, rss_kb, submit_burst, wait_ended
from sandbox_bench import handoff_section, runtime_section

from devstack.stack import LocalStack

NO_TOOLS = {"tools": []}
# The scripted model stands in for a GPU server: let the proxy keep every call in flight.
PROXY_ENV = {"TASKYARD_PROXY_MAX_IN_FLIGHT": "4096", "TASKYARD_PROXY_QUEUE_SIZE": "8192"}
TARGET_IN_FLIGHT = 500  # issue 30: of 1,000 one-step tasks at 2 s, on this 2-core machine


def in_flight(pool: str, concurrency: int, tasks: int, latency_ms: float) -> dict[str, float]:
    """`tasks` one-step tasks at once against a model answering after `latency_ms`."""
    stack = LocalStack(
        agent_pool=pool, agent_concurrency=concurrency, sandbox_backend="local",
        extra_env=PROXY_ENV,
    ).start()  # fmt: skip
    try:
        configure_model(stack, latency_ms=0)
        warm = submit_burst(stack, [{"input": "warm up", "agent": NO_TOOLS}], 1)
        wait_ended(stack, warm.ids, 60)
        pid = stack.procs["agent_worker"].pid
        before = rss_kb(pid)
        configure_model(stack, latency_ms=latency_ms)
        bodies = [{"input": f"hello {i}", "agent": NO_TOOLS} for i in range(tasks)]
        burst = submit_burst(stack, bodies, connections=32)
        ended = wait_ended(stack, burst.ids, timeout_s=tasks * latency_ms / 1000 + 120)
        peak = peak_rss_kb(pid)
        held, fill_s = held_at_once(stack, tasks)
    finally:
        stack.stop()
    makespan = ended["ended_at"] - burst.started
    return {
        "held": held,
        "fill_s": fill_s,
        "tasks": tasks,
        "succeeded": ended["counts"].get("succeeded", 0),
        "stuck": ended["stuck"],
        "submit_s": burst.submitted - burst.started,
        "makespan_s": makespan,
        "in_flight": tasks * latency_ms / 1000 / makespan,
        "rss_kb_per_task": (peak - before) / tasks,
    }


def held_at_once(stack: LocalStack, tasks: int, limit_s: float = 30) -> tuple[int, float]:
    """The most model calls the worker holds at once: the model answers none until `tasks`
    wait together (`hold_until`), or until `limit_s` passes; (peak, seconds to fill or nan)."""
    configure_model(stack, latency_ms=0, hold_until=tasks)
    bodies = [{"input": f"held {i}", "agent": NO_TOOLS} for i in range(tasks)]
    burst = submit_burst(stack, bodies, connections=32)
    stats_url = f"http://127.0.0.1:{stack.ports.model}/scripted/stats"
    peak, fill_s = 0, float("nan")
    while time.monotonic() - burst.started < limit_s:
        peak = httpx.get(stats_url, timeout=5).json()["peak_held"]
        if peak >= tasks:
            fill_s = time.monotonic() - burst.started
            break
        time.sleep(0.1)
    configure_model(stack, hold_until=None)  # lets the held calls go
    wait_ended(stack, burst.ids, timeout_s=120)
    return peak, fill_s


def inflight_section(quick: bool) -> None:
    latency = 2000.0
    new_tasks = 300 if quick else 1000
    old_tasks = 64 if quick else 200
    print(f"\n## In flight: one-step tasks at once, scripted model at {latency:.0f} ms")
    print("(held at once: the model answers none until all the tasks' calls wait together, or")
    print(" 30 s pass; the most that waited together, and when they all did)")
    print("| agent worker | tasks | ok | submit | makespan | effective in flight | RSS/task "
          "| held at once | all held after |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    configs = (("gevent -c 1000 (new)", "gevent", 1000, new_tasks),
               ("threads -c 16 (old)", "threads", 16, old_tasks))  # fmt: skip
    for label, pool, conc, tasks in configs:
        r = in_flight(pool, conc, tasks, latency)
        print(f"| {label} | {tasks} | {r['succeeded']} | {r['submit_s']:.2f} s | "
              f"{r['makespan_s']:.2f} s | **{r['in_flight']:.0f}** | "
              f"{r['rss_kb_per_task']:.1f} KB | **{r['held']:.0f}** | "
              f"{r['fill_s']:.2f} s |")  # fmt: skip
    print(
        f"(effective in flight: the model's latency x tasks / makespan; the ideal is every task "
        f"at once; issue 30's target >= {TARGET_IN_FLIGHT} of 1,000, the full run's count)"
    )


SECTIONS: dict[str, Callable[[bool], None]] = {
    "inflight": inflight_section,
    "overhead": overhead_section,
    "long": long_section,
    "gateway": gateway_section,
    "warmpool": warm_pool_section,
    "hosts": hosts_section,
    "capacity": capacity_section,
    "acceptwait": accept_wait_section,
    "runtimes": runtime_section,
    "handoff": handoff_section,
    "syscalls": syscall_section,
}


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default=",".join(SECTIONS), help="sections, comma-separated")
    parser.add_argument("--quick", action="store_true", help="fewer tasks (a smoke run)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _stop)  # `timeout` and CI stop the stacks like Ctrl-C does
    print(f"# agent tier benchmark ({time.strftime('%Y-%m-%d %H:%M')}, 2-core machine)")
    for name in args.only.split(","):
        SECTIONS[name](args.quick)


if __name__ == "__main__":
    main()
