"""Flame graphs of the agent worker and the tool worker under the capacity section's load.

The local stack as `bench/_bench_capacity.py` runs it (local sandboxes, the scripted model at
0 ms), warmed the same way; then py-spy samples both workers (only what holds the GIL: the
Python work, not the waits, by function) while `--tasks` two-step tasks run from 16 clients.
One SVG per worker goes to `--out` (docs/flame keeps a before and an after: docs/benchmarks.md).

    .venv/bin/python bench/profile_capacity.py --out docs/flame --tag after

py-spy is not in the locks: `pip install py-spy` into the venv that runs this.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _bench_capacity import SESSIONS, _idle, _round
from _stackbench import configure_model

from devstack.stack import LocalStack

WORKERS = ("agent_worker", "tool_worker")


def _record(pid: int, svg: Path, seconds: float) -> subprocess.Popen[bytes]:
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
    argv = [spy, "record", "--gil", "--nonblocking", "--nolineno", "-r", "100",
            "-d", f"{seconds:.0f}", "-f", "flamegraph", "-o", str(svg), "-p", str(pid)]  # fmt: skip
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("docs/flame"))
    parser.add_argument("--tag", default="now", help="the SVGs' suffix: before, after, ...")
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=15.0, help="how long py-spy samples")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    stack = LocalStack(sandbox_backend="local").start()
    try:
        configure_model(stack, latency_ms=0)
        idle = _idle(stack, 1.0)
        _round(stack, 2 * SESSIONS, 4, idle)  # warm: sandboxes, live agents, connections
        time.sleep(3)
        spies = [_record(stack.procs[name].pid, args.out / f"{name}-{args.tag}.svg",
                         args.seconds) for name in WORKERS]  # fmt: skip
        time.sleep(1)  # py-spy attached
        result = _round(stack, args.tasks, 16, idle)
        for spy in spies:
            spy.wait(timeout=args.seconds + 60)
    finally:
        stack.stop()
    print(f"{result.tasks} tasks in {result.seconds:.1f} s; flame graphs in {args.out}")


if __name__ == "__main__":
    main()
