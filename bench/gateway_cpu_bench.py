"""The gateway's CPU per task, beside every other process of the local stack.

Clients run 2-step tasks (the model calls `print(1)` in the local sandbox, then answers) through
the gateway: POST /v1/tasks, then the task's events over SSE until its final status. Each
process's CPU time (from /proc, children included) is divided by the tasks run; medians over
the rounds. With `--baseline <commit>`, that commit's gateway runs beside this checkout's on the
same stack, rounds alternating, so the two compare within one run.

    .venv/bin/python bench/gateway_cpu_bench.py [--tasks 300] [--clients 8] [--rounds 5]
        [--baseline main]
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _gateway_cpu import Gateway, baseline_gateway, median_row, run_rounds

from devstack.stack import LocalStack

_PROCESSES = ("gateway", "agent_worker", "tool_worker", "redis", "proxy", "model", "beat")


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=300, help="tasks per round")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", help="a commit whose gateway runs beside this one")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _stop)
    stack = LocalStack(sandbox_backend="local").start()
    baseline = None
    try:
        gateways = [Gateway("this tree", stack.gateway_url, stack.procs["gateway"].pid)]
        if args.baseline:
            baseline, other = baseline_gateway(stack, args.baseline)
            gateways.append(other)
        rounds = run_rounds(stack, gateways, args.tasks, args.clients, args.rounds)
    finally:
        if baseline is not None:
            baseline.stop()
        stack.stop()
    print(f"# gateway CPU per task ({time.strftime('%Y-%m-%d %H:%M')}); {args.clients} clients, "
          f"{args.rounds} rounds of {args.tasks} tasks per gateway; medians")  # fmt: skip
    print(f"| gateway | tasks/s | events/task | {' | '.join(_PROCESSES)} (CPU ms per task) |")
    print("| --- " * (len(_PROCESSES) + 3) + "|")
    for gateway in gateways:
        rate, events, cpu = median_row(rounds, gateway.name)
        cells = " | ".join(f"{cpu.get(name, 0):.2f}" for name in _PROCESSES)
        print(f"| {gateway.name} | {rate:.1f} | {events:.1f} | {cells} |")
    print("\nper round, the gateway's CPU ms per task:")
    for r in rounds:
        print(f"  {r.gateway}: {r.cpu_ms[r.gateway]:.2f} ms ({r.tasks_per_s:.1f} tasks/s)")


if __name__ == "__main__":
    main()
