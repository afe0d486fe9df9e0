"""Sandboxes at fleet speed (issue 29, goal 1): a burst of new sessions, each task's first
cell in a session of its own, with the fork server (many sessions per container) and with
today's container per session side by side, measured alternately in one run.

Sections:

- `burst`: the held-out measurement. A local stack (devstack's `LocalStack`: gateway, agent
  and tool workers, the scripted model at 1,000 ms; Docker sandbox) right after it starts:
  200 two-step tasks submitted at once, each in a new session, the model's first turn the
  cell `import numpy, pandas; print(len(pandas.DataFrame(numpy.ones((3, 3)))))`. Printed:
  first submission to the last task's end, how many succeeded, new sessions/s; each first
  cell's latency from the tool worker's point of view (its thread took the job, to the result
  stored) and from the step's (the step committed, to the result stored: queueing included);
  when the sandbox containers started; the memory (PSS, and unique: USS) of each idle session
  read from /proc on the host (runc: a container's processes are the host's; needs root).
- `direct`: the same first cell from 200 threads straight on a `DockerSandboxProvider`
  (`get(key).run(cell)`) right after its start-up check, no Celery, no model.
- `floor`: a bare `docker run --rm` of the sandbox image, and a bare Celery no-op hop.

    .venv/bin/python bench/sandbox_burst_bench.py [--quick] [--only burst,direct,floor]
        [--tasks 200] [--rounds 1] [--sessions 64,1] [--engine proxy,direct] [--local]
        [--tool-concurrency N] [--dump DIR]

`--sessions` lists the values of TASKYARD_SANDBOX_SESSIONS_PER_CONTAINER compared (1: one
container per session); `--engine` how the tool worker reaches the Docker engine: through the
engine proxy as the stack wires it (`proxy`), or the engine's own socket (`direct`);
`--local` adds the local backend's burst (bubblewrap namespaces, no engine). The
sandbox image is `TASKYARD_SANDBOX_IMAGE` if set, else taskyard/sandbox:latest;
`scripts/build_sandbox_image.sh` builds it.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _burst_probe import (
    CellTimes,
    ContainerMemory,
    cell_times,
    container_memory,
    container_starts,
    containers_cpu_s,
    engine_pids,
    median_mib,
    pct,
)
from _celery_floor import measure as celery_floor
from _cpu import cpu_s, tree_cpu_s
from _stackbench import configure_model, submit_burst, wait_ended

from devstack import redis_server
from devstack.procs import ROOT, Processes, free_port
from devstack.stack import LocalStack
from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.sandbox.docker.provider import DockerSandboxProvider
from taskyard.sandbox.provider import SandboxLimits

CELL = "import numpy, pandas; print(len(pandas.DataFrame(numpy.ones((3, 3)))))"
IMAGE = os.environ.get("TASKYARD_SANDBOX_IMAGE", "taskyard/sandbox:latest")
# The scripted model stands in for a GPU server: let the proxy keep every call in flight.
PROXY_ENV = {"TASKYARD_PROXY_MAX_IN_FLIGHT": "4096", "TASKYARD_PROXY_QUEUE_SIZE": "8192"}
LOCAL = "local"  # the local backend in place of the engine: one bubblewrap kernel a session
GOAL = "goal: last task <= 10 s, >= 20 new sessions/s; first cell p50 <= 100 ms, p99 <= 1.5 s"


def _label(sessions: int, engine: str = "proxy") -> str:
    if engine == LOCAL:
        return "local backend (namespaces, no engine)"
    shape = "container per session" if sessions == 1 else f"fork server, {sessions}/container"
    return shape if engine == "proxy" else f"{shape}, engine {engine}"


def _load() -> str:
    return "load " + " ".join(f"{x:.1f}" for x in os.getloadavg())


@dataclass
class BurstRun:
    sessions: int
    engine: str  # how the tool worker reached the engine: "proxy" (the stack's), "direct"
    tasks: int
    load: str
    makespan_s: float = float("nan")
    submit_s: float = float("nan")
    counts: dict[str, int] = field(default_factory=dict)
    cells: list[CellTimes] = field(default_factory=list)
    starts: list[float] = field(default_factory=list)  # containers, s after the first submit
    memory: list[ContainerMemory] = field(default_factory=list)
    t0: float = 0.0  # the first submission, wall clock
    cpu: dict[str, float] = field(default_factory=dict)  # CPU s during the burst, by part

    @property
    def label(self) -> str:
        return _label(self.sessions, self.engine)


def stack_burst(sessions: int, engine: str, tasks: int, latency_ms: float,
                tool_concurrency: int | None) -> BurstRun:  # fmt: skip
    """The held-out measurement on a fresh stack; what its tasks, logs and containers say."""
    env = {"TASKYARD_SANDBOX_SESSIONS_PER_CONTAINER": str(sessions),
           "TASKYARD_ENGINE_PROXY_MAX_SESSIONS": str(sessions), **PROXY_ENV}  # fmt: skip
    extra = {} if tool_concurrency is None else {"tool_concurrency": tool_concurrency}
    backend = LOCAL if engine == LOCAL else "docker"
    stack = LocalStack(extra_env=env, sandbox_backend=backend, engine_proxy=engine == "proxy",
                       **extra).start()  # type: ignore[arg-type]  # fmt: skip
    run = BurstRun(sessions, engine, tasks, _load())
    try:
        configure_model(stack, latency_ms=latency_ms)
        tag = uuid.uuid4().hex[:6]
        bodies = [{"input": f"```python\n{CELL}\n```", "session_id": f"burst-{tag}-{n}"}
                  for n in range(tasks)]  # fmt: skip
        before = _cpu_now(stack)
        wall = run.t0 = time.time()
        burst = submit_burst(stack, bodies, connections=32)
        wall_end = wall + (burst.submitted - burst.started)
        ended = wait_ended(stack, burst.ids, timeout_s=300)
        after = _cpu_now(stack)
        run.cpu = {part: after[part] - before.get(part, 0.0) for part in after}
        run.counts = {**ended["counts"], "never ended": ended["stuck"], "refused": burst.errors}
        run.submit_s = wall_end - wall
        run.cells = cell_times(stack.redis_url, burst.ids, stack.log_path("tool_worker"))
        last = max((c.ended for c in run.cells), default=float("nan"))
        run.makespan_s = last - wall if not ended["stuck"] else float("nan")
        run.starts = [at - wall for at in container_starts(stack.worker_label)]
        time.sleep(1.0)  # the last sessions go idle
        run.memory = container_memory(stack.worker_label)
    finally:
        stack.stop()
    return run


def _cpu_now(stack: LocalStack) -> dict[str, float]:
    """CPU seconds used so far: each service (its process tree), the sandbox containers
    (their cgroups; a container started meanwhile counts whole, its start-up included), the
    Docker engine (dockerd, containerd)."""
    used = {name: tree_cpu_s(child.pid) for name, child in stack.procs.items()}
    used["sandbox containers"] = sum(containers_cpu_s(stack.worker_label).values())
    used["docker engine"] = sum(cpu_s(pid) for pid in engine_pids())
    return used


def _print_cpu(runs: list[BurstRun]) -> None:
    parts = sorted(
        {p for r in runs for p in r.cpu}, key=lambda p: -max(r.cpu.get(p, 0) for r in runs)
    )
    print("\nCPU during the burst (first submission to last end), ms per task; all parts, and "
          "the tasks/s 2 cores allow at that cost:")  # fmt: skip
    print("| sandbox | " + " | ".join(parts) + " | all | 2 cores allow |")
    print("| --- " * (len(parts) + 3) + "|")
    for r in runs:
        total = sum(r.cpu.values())
        cells = " | ".join(f"{r.cpu.get(p, 0) / r.tasks * 1e3:.0f}" for p in parts)
        print(f"| {r.label} | {cells} | **{total / r.tasks * 1e3:.0f}** "
              f"| {2 * r.tasks / total:.0f} tasks/s |")  # fmt: skip


def _print_burst(runs: list[BurstRun], latency_ms: float) -> None:
    print(f"\n## A burst of new sessions through the stack (scripted model at {latency_ms:.0f} ms)")
    print(f"Each task a new session; first cell `{CELL}`; {GOAL}.")
    print(
        "first cell, worker: a tool worker's thread took the job, to its result stored; "
        "step: the step asking for it committed, to its result stored (queueing included)."
    )
    print("| sandbox | load at start | tasks | ok | submit | last task ended | new sessions/s "
          "| first cell, worker p50 / p99 | step p50 / p99 | containers started |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in runs:
        worker = [c.worker_s for c in r.cells if c.worker_s is not None]
        step = [c.stored - c.dispatched for c in r.cells]
        within = sum(0 <= s <= r.makespan_s for s in r.starts)
        print(f"| {r.label} | {r.load} | {r.tasks} | {r.counts.get('succeeded', 0)} "
              f"| {r.submit_s:.2f} s | **{r.makespan_s:.1f} s** "
              f"| **{r.tasks / r.makespan_s:.1f}** "
              f"| **{pct(worker, .5) * 1e3:.0f} / {pct(worker, .99) * 1e3:.0f} ms** "
              f"| {pct(step, .5) * 1e3:.0f} / {pct(step, .99) * 1e3:.0f} ms "
              f"| {len(r.starts)} ({within} during the burst) |")  # fmt: skip
    for r in runs:
        _print_where(r)
    _print_cpu(runs)
    _print_memory(runs)


def _print_where(r: BurstRun) -> None:
    """Where the burst's time went, each phase in seconds after the first submission."""
    if not r.cells:
        return
    dispatched = [c.dispatched - r.t0 for c in r.cells]
    picked = [c.picked - r.t0 for c in r.cells if c.picked is not None]
    stored = [c.stored - r.t0 for c in r.cells]
    queued = [c.queued_s for c in r.cells if c.queued_s is not None]
    worker = sorted((c.worker_s for c in r.cells if c.worker_s is not None), reverse=True)
    tail = [c.ended - c.stored for c in r.cells]
    starts = ", ".join(f"{s:.1f}" for s in r.starts[:10])
    more = ""
    if len(r.starts) > 10:
        more = f" (+{len(r.starts) - 10} more, the last at {r.starts[-1]:.1f})"
    print(f"\n{r.label}, seconds after the first submission: first steps committed "
          f"(cells asked for) {min(dispatched):.2f}-{max(dispatched):.2f} (p50 "
          f"{pct(dispatched, .5):.2f}); tool jobs taken {min(picked):.2f}-{max(picked):.2f}; "
          f"results stored {min(stored):.2f}-{max(stored):.2f} (p50 {pct(stored, .5):.2f}); "
          f"a job queued p50 {pct(queued, .5):.2f} s, max {max(queued):.2f} s; the 5 longest "
          f"worker times {', '.join(f'{w:.2f}' for w in worker[:5])} s; result stored to task "
          f"end p50 {pct(tail, .5):.2f} s (the second model call); containers started at "
          f"{starts}{more}.")  # fmt: skip


def _print_memory(runs: list[BurstRun]) -> None:
    print(
        "\nIdle sessions' memory after the burst (host /proc/<pid>/smaps_rollup; PSS counts "
        "each shared page's share, USS only the process's own pages):"
    )
    print("| sandbox | containers | executors | executor PSS p50 | executor USS p50 "
          "| everything in the containers (PSS) / session |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- |")
    for r in runs:
        if r.engine == LOCAL:
            continue  # no containers: its kernels count toward the tool worker (above)
        executors = [p for m in r.memory for p in m.executors]
        total = sum(m.total("Pss") for m in r.memory)
        print(f"| {r.label} | {len(r.memory)} | {len(executors)} "
              f"| {median_mib([p['Pss'] for p in executors]):.1f} MiB "
              f"| {median_mib([p['Uss'] for p in executors]):.1f} MiB "
              f"| **{total / max(1, r.tasks) / 2**20:.1f} MiB** |")  # fmt: skip


def burst_section(args: argparse.Namespace) -> None:
    runs = []
    shapes = [(sessions, engine) for sessions in args.sessions for engine in args.engine]
    shapes += [(1, LOCAL)] if args.local else []
    for n in range(args.rounds):
        for sessions, engine in shapes if n % 2 == 0 else list(reversed(shapes)):
            label = _label(sessions, engine)
            print(f"(burst: {label}, round {n + 1}, {_load()})", file=sys.stderr)
            run = stack_burst(sessions, engine, args.tasks, args.latency_ms,
                              args.tool_concurrency)  # fmt: skip
            runs.append(run)
            if args.dump:
                _dump(run, Path(args.dump) / f"burst-{sessions}-{engine}-{n + 1}.csv")
    _print_burst(sorted(runs, key=lambda r: (-r.sessions, r.engine != "proxy")), args.latency_ms)


def _dump(run: BurstRun, path: Path) -> None:
    """Each first cell's times (s after the first submission), and the containers' starts."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = ["task,dispatched,picked,stored,ended"]
    for c in sorted(run.cells, key=lambda c: c.picked or 0):
        picked = "" if c.picked is None else f"{c.picked - run.t0:.3f}"
        rows.append(f"{c.task_id},{c.dispatched - run.t0:.3f},{picked},"
                    f"{c.stored - run.t0:.3f},{c.ended - run.t0:.3f}")  # fmt: skip
    rows += [f"container,{at:.3f},,," for at in run.starts]
    path.write_text("\n".join(rows) + "\n")


def direct_burst(sessions: int, count: int) -> tuple[list[float], float, str]:
    """`count` threads each run the first cell of a new session on one provider, right after
    its start-up check; each one's time, and first start to last answer."""
    settings = ToolWorkerSettings(
        sandbox_image=IMAGE, sandbox_sessions_per_container=sessions,
        sandbox_worker_label=f"bench-{uuid.uuid4().hex[:8]}",
    )  # fmt: skip
    limits = SandboxLimits(per_tenant=10_000, per_worker=10_000)
    provider = DockerSandboxProvider(settings, limits=limits)
    load = _load()
    took: list[float] = []
    failed: list[str] = []

    def one(n: int) -> None:
        start = time.perf_counter()
        result = provider.get(f"bench:direct-{n}").run(CELL, 120)
        if result.error is not None or result.stdout.strip() != "3":
            failed.append(str(result.error))
        took.append(time.perf_counter() - start)

    try:
        provider.check()
        threads = [threading.Thread(target=one, args=(n,)) for n in range(count)]
        begin = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        makespan = time.perf_counter() - begin
    finally:
        provider.close_all()
    assert not failed, failed[:3]
    return took, makespan, load


def direct_section(args: argparse.Namespace) -> None:
    print(f"\n## The same first cell straight on the provider: {args.tasks} threads at once")
    print(
        "(`DockerSandboxProvider.get(key).run(cell)` right after its start-up check; "
        "from asking for the sandbox to the cell's answer)"
    )
    print("| sandbox | load | all answered after | new sessions/s | p50 | p99 |")
    print("| --- | --- | --- | --- | --- | --- |")
    for n in range(args.rounds):
        for sessions in args.sessions if n % 2 == 0 else list(reversed(args.sessions)):
            took, makespan, load = direct_burst(sessions, args.tasks)
            print(f"| {_label(sessions)} | {load} | {makespan:.2f} s "
                  f"| {args.tasks / makespan:.1f} | {pct(took, .5) * 1e3:.0f} ms "
                  f"| {pct(took, .99) * 1e3:.0f} ms |")  # fmt: skip


def bare_docker_run(samples: int) -> list[float]:
    argv = ["docker", "run", "--rm", "--network", "none", "--entrypoint", "/usr/bin/python3",
            IMAGE, "-c", "pass"]  # fmt: skip
    took = []
    for _ in range(samples):
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        took.append(time.perf_counter() - start)
    return took


def celery_hop() -> dict[str, float]:
    processes = Processes(log_dir=Path(os.environ.get("TMPDIR", "/tmp")))
    port = free_port()
    data = Path(f"/tmp/burst-floor-{port}")
    data.mkdir(exist_ok=True)
    redis_server.start(processes, "redis", port, data)
    url = f"redis://127.0.0.1:{port}"
    worker = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "_celery_floor.py"), "worker", url],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        time.sleep(3)  # the worker connects
        return celery_floor(url, round_trips=200, burst=500)
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        processes.stop("redis")


def floor_section(args: argparse.Namespace) -> None:
    samples = 5 if args.quick else 10
    load = _load()
    runs = bare_docker_run(samples)
    hop = celery_hop()
    print(f"\n## The floor ({load})")
    print("| | p50 | |")
    print("| --- | --- | --- |")
    print(f"| bare `docker run --rm --network none` of the sandbox image, `python3 -c pass` "
          f"({samples} runs) | {statistics.median(runs) * 1e3:.0f} ms "
          f"| max {max(runs) * 1e3:.0f} ms |")  # fmt: skip
    print(
        f"| bare Celery no-op hop (same machine, its own Redis) | {hop['p50_ms']:.2f} ms "
        f"| p99 {hop['p99_ms']:.2f} ms; {hop['tasks_s']:.0f} hops/s from 16 clients |"
    )


SECTIONS = {"burst": burst_section, "direct": direct_section, "floor": floor_section}


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(SECTIONS), help="sections, comma-separated")
    parser.add_argument("--quick", action="store_true", help="60 tasks, one round (a smoke run)")
    parser.add_argument("--tasks", type=int, help="tasks (sessions) in the burst (200)")
    parser.add_argument("--rounds", type=int, default=1, help="alternating rounds of each")
    parser.add_argument("--latency-ms", type=float, default=1000.0, help="the scripted model's")
    parser.add_argument(
        "--sessions", default="64,1", help="TASKYARD_SANDBOX_SESSIONS_PER_CONTAINER values compared"
    )
    parser.add_argument(
        "--engine", default="proxy", help="how the tool worker reaches the engine: proxy, direct"
    )
    parser.add_argument("--local", action="store_true", help="the local backend's burst too")
    parser.add_argument("--dump", help="a directory: each burst's per-task times as CSV")
    parser.add_argument(
        "--tool-concurrency",
        type=int,
        help="the stack's tool worker threads (default: LocalStack's)",
    )
    args = parser.parse_args()
    args.tasks = args.tasks or (60 if args.quick else 200)
    args.sessions = [int(s) for s in args.sessions.split(",")]
    args.engine = args.engine.split(",")
    os.environ.setdefault("TASKYARD_SANDBOX_IMAGE", IMAGE)  # the stack's services inherit it
    signal.signal(signal.SIGTERM, _stop)
    print(
        f"# sandboxes at fleet speed ({time.strftime('%Y-%m-%d %H:%M')}, "
        f"{os.cpu_count()}-core machine, image {IMAGE})"
    )
    for name in args.only.split(","):
        SECTIONS[name](args)


if __name__ == "__main__":
    main()
