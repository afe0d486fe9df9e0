"""What the engine proxy adds: each Docker request a tool worker makes, straight to the engine
and through the proxy, in one run, alternating in rounds; medians, and the difference.

    .venv/bin/python bench/engine_proxy_bench.py [--rounds 3] [--n 20] [--calls 50] [--burst 8]

Requests: `_ping` (the proxy alone: nothing to check), inspect of the worker's own container,
create (the tool worker's own, `ContainerSpec`: the body parsed and checked), attach (to the
101 answer); then a cell on a warm session (`print(1)`, one round trip through the spliced
attach stream), and a burst of `--burst` new sessions at once, no warm pool (each a container
created, attached, started and ready): its sessions, and its slowest.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import docker
from pydantic import SecretStr

from devstack.engine_proxy import EngineAccess, start_engine_proxy
from devstack.procs import Processes
from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.sandbox.docker.provider import ENGINE_TOKEN_HEADER, DockerSandboxProvider
from taskyard.sandbox.docker.spec import ContainerSpec
from taskyard.sandbox.errors import SandboxError
from taskyard.sandbox.provider import SandboxLimits

SIDES = ("direct", "proxy")
_ROOMY = SandboxLimits(per_tenant=10_000, per_worker=10_000)


def _timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def _cpu_s(pid: int) -> float:
    """The CPU time the process's main thread (the proxy's event loop) has used, to the ns."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9


class _Side:
    """One way to the engine: a client, the figures measured through it, and (through the
    proxy) the CPU the proxy spent on each request."""

    def __init__(
        self, name: str, client: docker.DockerClient, token: str, image: str, proxy_pid: int | None
    ) -> None:
        self.name = name
        self.client = client
        self.token = token
        self.spec = ContainerSpec(image=image, memory="128m")
        self.proxy_pid = proxy_pid
        self.times: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}
        self.failed = 0  # burst sessions that did not start

    def add(self, what: str, took: float) -> None:
        self.times.setdefault(what, []).append(took)

    def measure(self, what: str, action: Callable[[], object]) -> None:
        before = _cpu_s(self.proxy_pid) if self.proxy_pid else 0.0
        self.add(what, _timed(action))
        if self.proxy_pid:
            self.cpu.setdefault(what, []).append(_cpu_s(self.proxy_pid) - before)

    def one_of_each(self, own: str) -> None:
        api = self.client.api
        self.measure("_ping", api.ping)
        self.measure("inspect", lambda: api.inspect_container(own))
        made: list[Any] = []
        self.measure("create", lambda: made.append(self.spec.create(api, {})))
        self.measure("attach", lambda: made.append(api.attach_socket(made[0], _STREAM)))
        made[1].close()
        api.remove_container(made[0], force=True)

    def provider(self, settings: ToolWorkerSettings) -> DockerSandboxProvider:
        as_worker = settings.model_copy(update={"sandbox_engine_token": SecretStr(self.token)})
        return DockerSandboxProvider(as_worker, client=self.client, pool_size=0, limits=_ROOMY)

    def burst(self, settings: ToolWorkerSettings, sessions: int) -> None:
        provider = self.provider(settings)
        took: list[float] = []

        def session(n: int) -> None:
            try:
                took.append(_timed(lambda: provider.get(f"bench:burst{n}").run("1", 60)))
            except SandboxError:  # a start past its deadline on a machine this loaded
                self.failed += 1

        threads = [threading.Thread(target=session, args=(n,)) for n in range(sessions)]
        try:
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            provider.close_all()
        for one in took:
            self.add("burst: a session", one)
        self.add("burst: its slowest", max(took))


_STREAM = {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}


def _p10(samples: list[float]) -> float:
    """The tenth percentile: what a request takes when the machine's load leaves it alone."""
    ordered = sorted(samples)
    return ordered[len(ordered) // 10]


def _in_turn(sides: dict[str, _Side], n: int) -> list[_Side]:
    """Both sides, the first going first on even turns: neither always meets a warmer engine."""
    both = list(sides.values())
    return both if n % 2 == 0 else both[::-1]


def _requests(sides: dict[str, _Side], n: int) -> None:
    """`n` of each plain request through each side in turn, on containers it made."""
    own = {name: side.spec.create(side.client.api, {}) for name, side in sides.items()}
    try:
        for turn in range(n):
            for side in _in_turn(sides, turn):
                side.one_of_each(own[side.name])
    finally:
        for name, side in sides.items():
            side.client.api.remove_container(own[name], force=True)


def _cells(sides: dict[str, _Side], settings: ToolWorkerSettings, calls: int) -> None:
    """`calls` cells on a warm session of each side, in turn."""
    providers = {name: side.provider(settings) for name, side in sides.items()}
    try:
        warm = {name: provider.get("bench:warm") for name, provider in providers.items()}
        for sandbox in warm.values():
            sandbox.run("print(1)", 30)
        for turn in range(calls):
            for side in _in_turn(sides, turn):
                side.add("cell", _timed(lambda side=side: warm[side.name].run("print(1)", 30)))
    finally:
        for provider in providers.values():
            provider.close_all()


def _report(sides: dict[str, _Side], args: argparse.Namespace, load: float) -> None:
    print(
        f"\n## Engine proxy: added latency ({date.today()}, {args.rounds} rounds, sides in turn, "
        f"load average {load:.1f} on {os.cpu_count()} cores)"
    )
    print(
        f"`python bench/engine_proxy_bench.py --rounds {args.rounds} --n {args.n} "
        f"--calls {args.calls} --burst {args.burst}`\n"
    )
    print(
        "| request | samples | direct median | through the proxy | added | added at p10 | "
        "proxy CPU median |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")  # fmt: skip
    proxy = sides["proxy"]
    for what in sides["direct"].times:
        direct, proxied = (statistics.median(sides[s].times[what]) * 1e3 for s in SIDES)
        low_direct, low_proxied = (_p10(sides[s].times[what]) * 1e3 for s in SIDES)
        count = len(sides["direct"].times[what])
        cpu = f"{statistics.median(proxy.cpu[what]) * 1e6:.0f} µs" if what in proxy.cpu else "-"
        added, added_low = proxied - direct, low_proxied - low_direct
        print(f"| {what} | {count} | {direct:.2f} ms | {proxied:.2f} ms | {added:+.2f} ms | "
              f"{added_low:+.2f} ms | {cpu} |")  # fmt: skip
    if args.burst:
        failed = ", ".join(f"{side.name} {side.failed}" for side in sides.values())
        print(f"\nBurst sessions whose kernel did not start within 30 s: {failed}.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--n", type=int, default=20, help="requests of each kind per round")
    parser.add_argument("--calls", type=int, default=50, help="cells per round")
    parser.add_argument("--burst", type=int, default=8, help="new sessions at once (0: none)")
    args = parser.parse_args()
    settings = ToolWorkerSettings(sandbox_warm_pool=0, sandbox_memory="128m")
    run_dir = tempfile.mkdtemp(prefix="engine-proxy-bench-")
    access = EngineAccess.for_workers(["bench"], f"unix://{run_dir}/engine-proxy.sock")
    token = access.tokens["bench"]
    with Processes(log_dir=None) as procs:
        child = start_engine_proxy(procs, "engine_proxy", access,
                                   {"TASKYARD_SANDBOX_IMAGE": settings.sandbox_image})  # fmt: skip
        proxied = docker.DockerClient(base_url=access.address)
        proxied.api.headers[ENGINE_TOKEN_HEADER] = token
        image = settings.sandbox_image
        sides = {
            "direct": _Side("direct", docker.from_env(), "", image, None),
            "proxy": _Side("proxy", proxied, token, image, child.pid),
        }
        load = os.getloadavg()[0]
        for turn in range(args.rounds):
            _requests(sides, args.n)
            _cells(sides, settings, args.calls)
            for side in _in_turn(sides, turn) if args.burst else []:
                side.burst(settings, args.burst)
        _report(sides, args, (load + os.getloadavg()[0]) / 2)


if __name__ == "__main__":
    main()
