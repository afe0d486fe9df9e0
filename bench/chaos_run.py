"""Chaos run: two-step tasks across sessions while workers are SIGKILLed and Redis restarts.

Not part of `make test`: it takes minutes and both cores. Run it a few times, not in a loop:

    .venv/bin/python bench/chaos_run.py [--variants workers,shutdown,sigkill,failover]
        [--tasks 1000]

Each variant starts its own local stack (every service a process, a Redis of its own, the
scripted model, Docker sandboxes), submits `--tasks` tasks through the gateway, dealt
round-robin over `--sessions` sessions and spread evenly over `--window` seconds, while a
thread SIGKILLs (the process group, `LocalStack.kill`) the agent or the tool worker, chosen
at random, every `--pause` seconds (uniform), restarting it at once (`LocalStack.restart`):

- `workers`: only that;
- `shutdown`: and Redis gets SHUTDOWN once, half-way through the window (redis-py's
  `shutdown()`, which fsyncs the AOF), and is started again a second later;
- `sigkill`: and Redis gets SIGKILL once instead, half-way, run with `appendfsync always`;
- `sigkill-everysec` (only when asked for): the same SIGKILL under Redis's default policy;
- `failover`: Redis is a primary, a replica and three sentinels (`LocalStack(redis_sentinel=
  True)`); the primary gets SIGKILL once, half-way; once Sentinel has promoted the replica it
  is started again and returns as the new master's replica. The gateway answers 202 only once
  the replica holds the task (docs/deployment.md), so while one server is down it answers 503
  and the submission is sent again.

The chaos stops when the window has passed; then the run waits up to `--drain` seconds for
every accepted task to end, and reads them all back. Each task's input is a ```python block
that the scripted model runs with the code tool (step 0) and whose output it quotes (step 1);
the cell prints `value=<its unique token x 7>` and the number of times its kernel ran it.

What the table counts (one task in exactly one of succeeded, wrong, lost, stuck):

- accepted: tasks the gateway answered 202 (a POST that got no answer or a 5xx is sent
  again with the same Idempotency-Key for up to a minute; refusals are listed apart).
- succeeded: ended `succeeded` with `value=<token x 7>` in its result; wrong: ended
  `succeeded` without it.
- lost: accepted, but the task's hash is gone, or it ended `failed`, `timed_out` or
  `cancelled` (nothing here asks for those: each comes from a fault; reasons listed).
- duplicated steps: tasks whose transcript (GET /v1/tasks/{id} messages) or whose part of
  the session's memory in Redis holds its user message, tool call, tool result or answer
  more than once. Must be 0: steps commit exactly once.
- stuck: not ended when the drain deadline passed.
- drain: from the chaos's end (the last worker restarted) to the last task ending.

Tool calls are at least once, and counted apart, not as duplicated steps: "started more
than once" from the tool worker's log (every start is logged), split by whether a tool worker
was killed between the starts (a crash mid-call: its job returns after the visibility
timeout and runs in a fresh kernel, the old one died with its worker) or not (a duplicate
delivery while the first was still queued or running: the sweep re-sends what a task
standing still for TASKYARD_STALL_S waits on, and a job held past the visibility timeout is
restored); and "ran twice in one kernel" from the cells themselves (each appends its token to
a list in its session's kernel and prints how often its token, and any earlier one, is in
it), which shows a committed call run again where the session's later cells can see it.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _chaos_check import Drain, Verdict, read_back, watch_drain
from _chaos_faults import REDIS_DOWN_S, Chaos, FaultLog
from _chaos_workload import make_tasks, submit_paced

from devstack.stack import LocalStack

# Quick recovery: a dead worker's jobs return after 5 s, and a task that stood still for
# 3 s has what it waits on sent again by a sweep running every second. The same variables
# in the environment override these.
RECOVERY_ENV = {
    "TASKYARD_VISIBILITY_TIMEOUT_S": "5",
    "TASKYARD_STALL_S": "3",
    "TASKYARD_SWEEP_INTERVAL_S": "1",
}
_SUBMIT_PATIENCE_S = 60.0
_SHOWN_IDS = 5


@dataclass(frozen=True, slots=True)
class Variant:
    name: str
    title: str
    redis_fault: str | None
    appendfsync: str
    sentinel: bool = False  # a replica and three sentinels beside the primary


_FAILOVER = "workers + the Redis primary SIGKILLed once, Sentinel promoting its replica"
VARIANTS = {
    "workers": Variant("workers", "agent and tool workers SIGKILLed", None, "everysec"),
    "shutdown": Variant("shutdown", "workers + Redis SHUTDOWN once", "shutdown", "everysec"),
    "sigkill": Variant("sigkill", "workers + Redis SIGKILL once", "sigkill", "always"),
    # Not run by default: Redis's default policy under the same SIGKILL (docs/deployment.md).
    "sigkill-everysec": Variant(
        "sigkill-everysec", "workers + Redis SIGKILL once", "sigkill", "everysec"
    ),
    "failover": Variant("failover", _FAILOVER, "failover", "everysec", sentinel=True),
}
DEFAULT_VARIANTS = "workers,shutdown,sigkill,failover"


def stack_env(sessions: int) -> dict[str, str]:
    # One live sandbox per session, so no session loses its kernel to the per-tenant cap.
    room = str(max(64, sessions))
    recovery = {name: os.environ.get(name, value) for name, value in RECOVERY_ENV.items()}
    return {**recovery, "TASKYARD_SANDBOX_MAX_PER_TENANT": room,
            "TASKYARD_SANDBOX_MAX_PER_WORKER": room}  # fmt: skip


def run_variant(variant: Variant, args: argparse.Namespace) -> None:
    stack = LocalStack(
        sandbox_backend="docker", redis_appendfsync=variant.appendfsync,
        redis_sentinel=variant.sentinel, extra_env=stack_env(args.sessions),
    ).start()  # fmt: skip
    tasks = make_tasks(args.tasks, args.sessions)
    chaos = Chaos(stack, random.Random(args.seed), args.pause, variant.redis_fault,
                  redis_at_s=args.window / 2)  # fmt: skip
    try:
        began = time.monotonic()
        chaos.start()
        submitted = submit_paced(stack.gateway_url, stack.api_key, tasks, args.window,
                                 _SUBMIT_PATIENCE_S)  # fmt: skip
        time.sleep(max(0.0, began + args.window - time.monotonic()))
        faults = chaos.stop()
        drain = watch_drain(stack.master_url, submitted.accepted.values(), time.monotonic(),
                            args.drain)  # fmt: skip
        verdict = read_back(stack, submitted.accepted, tasks, drain.pending,
                            faults.kills["tool_worker"])  # fmt: skip
    finally:
        chaos.halt()  # no kill or restart while the stack stops
        stack.stop()
    print_variant(variant, verdict, drain, faults, args)
    print(f"- submissions: {len(tasks)} sent, {submitted.retries} POSTs sent again, "
          f"refused: {submitted.refused or 'none'}")  # fmt: skip
    print(f"- logs: {stack.run_dir}")


def print_variant(
    variant: Variant, verdict: Verdict, drain: Drain, faults: FaultLog, args: argparse.Namespace
) -> None:
    lost = sum(len(ids) for ids in verdict.lost.values())
    stuck = sum(len(ids) for ids in verdict.stuck.values())
    drained = f"{drain.last_end_s:.1f} s" if not stuck else f"not drained in {args.drain:.0f} s"
    print(f"\n## {variant.name}: {variant.title} (appendfsync {variant.appendfsync})\n")
    print("| accepted | succeeded | lost | duplicated steps | wrong | stuck | drain |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    counts = [verdict.accepted, len(verdict.succeeded), lost, len(verdict.duplicated),
              len(verdict.wrong), stuck, drained]  # fmt: skip
    print("| " + " | ".join(map(str, counts)) + " |\n")
    restarts = sorted(faults.restart_s) or [0.0]
    print(f"- faults: agent worker killed {len(faults.kills['agent_worker'])}x, tool worker "
          f"{len(faults.kills['tool_worker'])}x (each back in {restarts[0]:.1f}-"
          f"{restarts[-1]:.1f} s); Redis: {faults.redis or 'not restarted'}")  # fmt: skip
    print(f"- tool calls: {verdict.tool_calls} results in transcripts; started more than once "
          f"(tool worker log): {verdict.started_again_after_kill} with a tool worker killed "
          f"between the starts, {verdict.started_again_no_kill} with none; ran twice in one "
          f"kernel: {len(verdict.reran_in_kernel)} (a second run's output committed: "
          f"{verdict.rerun_committed})")  # fmt: skip
    redriven = ", ".join(f"{status} {n}" for status, n in verdict.redriven.most_common())
    print(f"- the sweep re-sent what {verdict.redriven.total()} standing tasks waited on "
          f"({redriven or 'none'})")  # fmt: skip
    print(f"- duplicated: {len(verdict.dup_transcript)} in transcripts, "
          f"{len(verdict.dup_memory)} in session memory; succeeded tasks missing from memory: "
          f"{len(verdict.memory_incomplete)}; sessions interleaving two tasks: "
          f"{len(verdict.sessions_interleaved)}")  # fmt: skip
    _print_ids("lost", verdict.lost)
    _print_ids("stuck", verdict.stuck)
    _print_ids("found", {"wrong": verdict.wrong, "duplicated": sorted(verdict.duplicated),
                         "missing from memory": verdict.memory_incomplete})  # fmt: skip


def _print_ids(what: str, groups: dict[str, list[str]]) -> None:
    for reason, ids in sorted(groups.items()):
        if ids:
            print(f"- {what}, {reason}: {len(ids)}, e.g. {', '.join(ids[:_SHOWN_IDS])}")


def print_settings(args: argparse.Namespace) -> None:
    print(f"# chaos run ({time.strftime('%Y-%m-%d %H:%M')}, 2-core machine)\n")
    print(f"- {args.tasks} two-step tasks over {args.sessions} sessions, submitted evenly over "
          f"{args.window:.0f} s; a worker SIGKILLed every {args.pause[0]:g}-{args.pause[1]:g} s "
          f"(seed {args.seed}); Redis down {REDIS_DOWN_S:g} s when restarted; drain deadline "
          f"{args.drain:.0f} s")  # fmt: skip
    env = ", ".join(f"{k}={v}" for k, v in stack_env(args.sessions).items())
    print(
        f"- settings: {env}; everything else default (agent worker gevent -c 1000, tool "
        "worker threads -c 4, Docker sandboxes, scripted model at zero latency)"
    )


def _pause(text: str) -> tuple[float, float]:
    low, _, high = text.partition("-")
    return float(low), float(high or low)


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variants", default=DEFAULT_VARIANTS,
                        help=f"comma-separated, of: {', '.join(VARIANTS)}")  # fmt: skip
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--window", type=float, default=120.0, help="seconds of chaos")
    parser.add_argument("--pause", type=_pause, default=(2.0, 6.0), help="between kills: 2-6")
    parser.add_argument("--drain", type=float, default=300.0, help="seconds to wait after")
    parser.add_argument("--seed", type=int, default=8)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _stop)  # `timeout` stops the stacks like Ctrl-C does
    print_settings(args)
    for name in args.variants.split(","):
        run_variant(VARIANTS[name], args)


if __name__ == "__main__":
    main()
