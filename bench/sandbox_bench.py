"""Sandbox figures: image build from scratch, session start, per-call latency. Prints medians.

    .venv/bin/python bench/sandbox_bench.py [--calls 200] [--build] [--runtimes] [--handoff]
        [--syscalls]

`--build` times scripts/build_sandbox_image.sh from scratch under throw-away tags (debootstrap
included), so the images other runs use are never touched. `--runtimes` prints only the Docker
backend under runc and under gVisor's runsc side by side (`runtime_section`, the `runtimes`
section of `make bench`); `--handoff` only a planned exit's hand-off and a killed worker's
kernels' lease (`handoff_section`, the `handoff` section); `--syscalls` only what the host's
kernel sees of one cell under each runtime (`_bench_syscalls.py`, the `syscalls` section).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import docker
from _bench_syscalls import syscall_section

from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.sandbox import LocalSandboxProvider, SandboxUnavailable
from taskyard.sandbox.docker.provider import OWNER_LABEL, WORKER_LABEL, DockerSandboxProvider
from taskyard.sandbox.provider import KernelSandboxProvider, SandboxLimits

ROOT = Path(__file__).resolve().parents[1]
BUILD_TAGS = {
    "SANDBOX_IMAGE": "taskyard/sandbox:bench",
    "SANDBOX_LOCAL_BASE": "taskyard/base:bench",
}


def _ms(seconds: list[float]) -> str:
    ordered = sorted(seconds)
    p90 = ordered[int(len(ordered) * 0.9) - 1] if len(ordered) >= 10 else ordered[-1]
    return f"median {statistics.median(ordered) * 1e3:8.2f} ms   p90 {p90 * 1e3:8.2f} ms"


def _timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def bench_build() -> None:
    client = docker.from_env()
    for tag in BUILD_TAGS.values():
        if client.images.list(name=tag):
            client.images.remove(tag, force=True)
    script = ROOT / "scripts" / "build_sandbox_image.sh"
    env = {**os.environ, **BUILD_TAGS}
    took = _timed(lambda: subprocess.run([script], env=env, check=True, capture_output=True))
    print(f"image build from scratch (debootstrap + import + build): {took:6.1f} s")
    took = _timed(lambda: subprocess.run([script], env=env, check=True, capture_output=True))
    print(f"image build again (inputs unchanged, skipped):            {took:6.2f} s")
    for tag in BUILD_TAGS.values():
        client.images.remove(tag, force=True)


def bench_provider(name: str, make: Callable[[int], KernelSandboxProvider], calls: int) -> None:
    cold = make(0)
    try:
        starts = [_timed(lambda i=i: cold.get(f"cold{i}").run("1", 30)) for i in range(5)]
        print(f"{name:7} first call, new session, no pool:  {_ms(starts)}")
        sandbox = cold.get("warm")
        sandbox.run("print(1)", 30)
        latencies = [_timed(lambda: sandbox.run("print(1)", 30)) for _ in range(calls)]
        print(f"{name:7} print(1) on a warm session:         {_ms(latencies)}")
    finally:
        cold.close_all()
    pooled = make(1)
    try:
        starts = []
        for i in range(5):
            time.sleep(1.5)  # let the pool refill: the figure is for a waiting warm kernel
            starts.append(_timed(lambda i=i: pooled.get(f"pool{i}").run("1", 30)))
        print(f"{name:7} first call, new session, warm pool: {_ms(starts)}")
    finally:
        pooled.close_all()


RUNTIMES = ("runc", "runsc")
NUMPY_IMPORT = "import numpy as np"
NUMPY_CELL = "a = np.random.default_rng(0).random((300, 300))\nfloat((a @ a).sum())"


class _Side:
    """One runtime's provider (no warm pool: a cold start is a container start) and its
    figures, named by what they time."""

    def __init__(self, runtime: str, label: str) -> None:
        settings = ToolWorkerSettings(
            sandbox_runtime=runtime, sandbox_warm_pool=0, sandbox_worker_label=label
        )
        self.provider = DockerSandboxProvider(settings, pool_size=0)
        self.runtime = runtime
        self.times: dict[str, list[float]] = {}

    def run(self, key: str, code: str) -> float:
        """Run `code` in the session `key`; how long it took."""
        sandbox = self.provider.get(f"bench:{self.runtime}-{key}")
        start = time.perf_counter()
        result = sandbox.run(code, 60)
        took = time.perf_counter() - start
        assert result.error is None, result.error
        return took

    def time(self, what: str, key: str, code: str) -> None:
        self.times.setdefault(what, []).append(self.run(key, code))

    def idle_mib(self) -> float:
        """What an idle session's container holds in memory (its cgroup, page cache left out)."""
        self.run("idle", "1")
        api = self.provider._client.api
        (found,) = api.containers(filters={"label": f"{OWNER_LABEL}={self.provider.owner}"})
        memory = api.stats(found["Id"], stream=False)["memory_stats"]
        stats = memory.get("stats", {})
        self.provider.release(f"bench:{self.runtime}-idle")
        return float(memory["usage"] - stats.get("cache", stats.get("file", 0))) / (1 << 20)


def runtime_section(quick: bool) -> None:
    """The Docker backend under runc and under gVisor (runsc), in one run, each step taken on
    both before the next, so the machine's load meets both alike."""
    starts, calls, cells = (3, 50, 5) if quick else (10, 200, 20)
    label = f"bench-{uuid.uuid4().hex[:8]}"  # no other run's clean-up takes these containers
    sides = [_Side(runtime, label) for runtime in RUNTIMES]
    try:
        sides[1].provider.check()
    except SandboxUnavailable as exc:  # no gVisor here: say why instead of a figure
        for side in sides:
            side.provider.close_all()
        print(f"\n## Sandbox runtimes: runsc cannot run here, so no side-by-side figures: {exc}")
        return
    load = os.getloadavg()[0]  # the machine is shared: the figures are read with its load
    try:
        for i in range(starts):  # each a new session: a container created and started
            for side in sides:
                side.time("cold start: a new session's first cell, `1`", f"cold{i}", "1")
                side.time("the first `import numpy` in a session", f"cold{i}", NUMPY_IMPORT)
                side.provider.release(f"bench:{side.runtime}-cold{i}")
        memory = [side.idle_mib() for side in sides]
        for side in sides:
            side.run("warm", NUMPY_IMPORT)
        for _ in range(calls):
            for side in sides:
                side.time("warm `print(1)`", "warm", "print(1)")
        for _ in range(cells):
            for side in sides:
                side.time("numpy cell, warm: a 300x300 matrix product", "warm", NUMPY_CELL)
    finally:
        for side in sides:
            side.provider.close_all()
    _print_sides(sides, memory, (starts, calls, cells))
    print(f"load average (1 min) at the start {load:.1f}, at the end {os.getloadavg()[0]:.1f}")


def _print_sides(sides: list[_Side], memory: list[float], counts: tuple[int, int, int]) -> None:
    starts, calls, cells = counts
    print(f"\n## Sandbox runtimes: runc and gVisor side by side ({starts} cold starts, "
          f"{calls} warm calls, {cells} numpy cells each; median (p90), ms)")  # fmt: skip
    print("| | " + " | ".join(side.runtime for side in sides) + " | runsc / runc |")
    print("| --- | --- | --- | --- |")
    for what in sides[0].times:
        medians = [statistics.median(side.times[what]) for side in sides]
        figures = " | ".join(_p50_p90(side.times[what]) for side in sides)
        print(f"| {what} | {figures} | {medians[1] / medians[0]:.1f}x |")
    print(f"| an idle session's memory (its cgroup) | {memory[0]:.0f} MiB | {memory[1]:.0f} MiB "
          f"| {memory[1] / memory[0]:.1f}x |")  # fmt: skip


def _p50_p90(seconds: list[float]) -> str:
    ordered = sorted(seconds)
    p90 = ordered[max(0, int(len(ordered) * 0.9) - 1)]
    return f"{statistics.median(ordered) * 1e3:.1f} ({p90 * 1e3:.1f})"


CRASH = """
import os, sys, time
from taskyard.plumbing.settings import SandboxSettings
from taskyard.sandbox.docker.provider import DockerSandboxProvider
p = DockerSandboxProvider(SandboxSettings(), pool_size=0)
for i in range(int(sys.argv[1])):
    p.get(f'bench:crash{i}').run('x = 1', 30)
print('ready', flush=True)
time.sleep(60)
"""


def handoff_section(quick: bool) -> None:
    """A planned exit's hand-off between two providers on this engine (`hand_off` of idle
    sessions, `take_over`, the first call after it), and how long a killed worker's kernels
    live on (their lease: `TOOL_WORKER_DEAD_S`)."""
    sessions = 5 if quick else 20
    label = f"bench-{uuid.uuid4().hex[:8]}"
    settings = ToolWorkerSettings(sandbox_warm_pool=0, sandbox_worker_label=label)
    roomy = SandboxLimits(per_tenant=10_000, per_worker=10_000)  # no eviction in the way
    maker = DockerSandboxProvider(settings, node="bench@a", limits=roomy)
    taker = DockerSandboxProvider(settings, node="bench@b", limits=roomy)
    keys = [f"bench:handoff{i}" for i in range(sessions)]
    handles: dict[str, str] = {}
    try:
        for key in keys:
            maker.get(key).run("import numpy as np\nx = np.arange(10)", 30)
        handed_s = _timed(lambda: handles.update(maker.hand_off(600)))
        maker.close_all()
        takes = [_timed(lambda key=key: taker.take_over(key, handles[key])) for key in keys]
        firsts = [_timed(lambda key=key: taker.get(key).run("int(x.sum())", 30)) for key in keys]
        warm = [_timed(lambda key=key: taker.get(key).run("int(x.sum())", 30)) for key in keys]
        kept = sum(taker.get(key).run("int(x.sum())", 30).result == "45" for key in keys)
    finally:
        maker.close_all()
        taker.close_all()
    lease_s, exited_s = _crash_lease(settings, 3 if quick else 10)
    load = os.getloadavg()[0]
    print(f"\n## Hand-off on a planned exit ({sessions} idle sessions, numpy imported; ms)")
    print("| | median | p90 |")
    print("| --- | --- | --- |")
    print(f"| `hand_off`: all {sessions} detached, leased, renamed | {handed_s * 1e3:.1f} | |")
    for what, seconds in (("`take_over` of one session (inspect, attach)", takes),
                          ("its first call after, `int(x.sum())`", firsts),
                          ("a warm call, for comparison", warm)):  # fmt: skip
        print(f"| {what} | {_p50_p90(seconds).replace(' (', ' | ').rstrip(')')} |")
    print(f"state kept: {kept} of {sessions} sessions")
    print(f"a SIGKILLed worker's kernels ({lease_s:g} s lease): all exited "
          f"{exited_s:.1f} s after the kill")  # fmt: skip
    print(f"load average (1 min) at the end {load:.1f}")


def _crash_lease(settings: ToolWorkerSettings, kernels: int) -> tuple[float, float]:
    """Start `kernels` sessions in a process, SIGKILL it, and time until every container ended."""
    label = f"bench-crash-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "TASKYARD_SANDBOX_WORKER_LABEL": label}
    child = subprocess.Popen(
        [sys.executable, "-c", CRASH, str(kernels)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    client = docker.from_env()
    labelled = {"label": f"{WORKER_LABEL}={label}"}
    child.kill()
    child.wait()
    killed = time.perf_counter()
    while any(c["State"] == "running" for c in client.api.containers(all=True, filters=labelled)):
        time.sleep(0.1)
    exited_s = time.perf_counter() - killed
    for container in client.api.containers(all=True, filters=labelled):
        client.api.remove_container(container["Id"], force=True)
    return settings.tool_worker_dead_s, exited_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--build", action="store_true", help="time an image build from scratch")
    parser.add_argument("--runtimes", action="store_true", help="only runc and runsc, side by side")
    parser.add_argument("--handoff", action="store_true", help="only the hand-off figures")
    parser.add_argument("--syscalls", action="store_true", help="only what the host sees (strace)")
    parser.add_argument("--quick", action="store_true", help="fewer runs (with those two)")
    args = parser.parse_args()
    if args.runtimes or args.handoff or args.syscalls:
        if args.runtimes:
            runtime_section(args.quick)
        if args.syscalls:
            syscall_section(args.quick)
        if args.handoff:
            handoff_section(args.quick)
        return
    if args.build:
        bench_build()
    settings = ToolWorkerSettings(sandbox_warm_pool=0)
    providers: dict[str, Callable[[int], KernelSandboxProvider]] = {
        "docker": lambda pool: DockerSandboxProvider(settings, pool_size=pool),
        "bwrap": lambda pool: LocalSandboxProvider(settings, launcher="bwrap", pool_size=pool),
    }
    for name, make in providers.items():
        bench_provider(name, make, args.calls)


if __name__ == "__main__":
    main()
