"""What the engine proxy adds: each Docker request a tool worker makes, straight to the engine
and through the proxy, in one run, alternating in rounds; medians, and the difference.

    .venv/bin/python bench/engine_proxy_bench.py [--rounds 3] [--n 20] [--calls 50] [--burst 8]

Requests: `_ping` (the proxy alone: nothing to check), inspect of the worker's own container,
create (the tool worker's own, `ContainerSpec`: the body parsed and checked), attach (to the
101 answer); then a cell on a warm session (`print(1)`, one round trip through the spliced
attach stream), and a burst of `--burst` new sessions at once, no warm pool (each a container
created, attached, started and ready): its median and slowest session.
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
from taskyard.sandbox.container_spec import ContainerSpec
from taskyard.sandbox.docker import ENGINE_TOKEN_HEADER, DockerSandboxProvider
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
        self, client: docker.DockerClient, token: str, image: str, proxy_pid: int | None
    ) -> None:
        self.client = client
        self.token = token
        self.spec = ContainerSpec(image=image, memory="128m")
        self.proxy_pid = proxy_pid
        self.times: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}

    def add(self, what: str, took: float) -> None:
        self.times.setdefault(what, []).append(took)

    def measure(self, what: str, action: Callable[[], object]) -> None:
        before = _cpu_s(self.proxy_pid) if self.proxy_pid else 0.0
        self.add(what, _timed(action))
        if self.proxy_pid:
            self.cpu.setdefault(what, []).append(_cpu_s(self.proxy_pid) - before)

    def requests(self, n: int) -> None:
        """`n` of each plain request, on containers made through this side."""
        api = self.client.api
        own = self.spec.create(api, {})
        try:
            for _ in range(n):
                self._one_of_each(api, own)
        finally:
            api.remove_container(own, force=True)

    def _one_of_each(self, api: docker.APIClient, own: str) -> None:
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

    def cells(self, settings: ToolWorkerSettings, calls: int) -> None:
        provider = self.provider(settings)
        try:
            sandbox = provider.get("bench:warm")
            sandbox.run("print(1)", 30)
            for _ in range(calls):
                self.add("cell", _timed(lambda: sandbox.run("print(1)", 30)))
        finally:
            provider.close_all()

    def burst(self, settings: ToolWorkerSettings, sessions: int) -> None:
        provider = self.provider(settings)
        took: list[float] = []

        def session(n: int) -> None:
            took.append(_timed(lambda: provider.get(f"bench:burst{n}").run("1", 60)))

        threads = [threading.Thread(target=session, args=(n,)) for n in range(sessions)]
        try:
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            provider.close_all()
        self.add("burst median", statistics.median(took))
        self.add("burst slowest", max(took))


_STREAM = {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}


def _report(sides: dict[str, _Side], args: argparse.Namespace, load: float) -> None:
    print(
        f"\n## Engine proxy: added latency ({date.today()}, {args.rounds} rounds alternating, "
        f"load average {load:.1f} on {os.cpu_count()} cores)"
    )
    print(
        f"`python bench/engine_proxy_bench.py --rounds {args.rounds} --n {args.n} "
        f"--calls {args.calls} --burst {args.burst}`\n"
    )
    print("| request | samples | direct median | through the proxy | added | proxy CPU median |")
    print("| --- | --- | --- | --- | --- | --- |")  # fmt: skip
    proxy = sides["proxy"]
    for what in sides["direct"].times:
        direct, proxied = (statistics.median(sides[s].times[what]) * 1e3 for s in SIDES)
        count = len(sides["direct"].times[what])
        cpu = f"{statistics.median(proxy.cpu[what]) * 1e6:.0f} µs" if what in proxy.cpu else "-"
        print(f"| {what} | {count} | {direct:.2f} ms | {proxied:.2f} ms | "
              f"{proxied - direct:+.2f} ms | {cpu} |")  # fmt: skip


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
            "direct": _Side(docker.from_env(), "", image, None),
            "proxy": _Side(proxied, token, image, child.pid),
        }
        load = os.getloadavg()[0]
        for _ in range(args.rounds):
            for side in sides.values():
                side.requests(args.n)
                side.cells(settings, args.calls)
                if args.burst:
                    side.burst(settings, args.burst)
        _report(sides, args, (load + os.getloadavg()[0]) / 2)


if __name__ == "__main__":
    main()
