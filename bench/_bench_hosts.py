"""Hosts, not processes: one short, fixed workload on the local stack with every service on
loopback, then with each service on a host of its own (`devstack.hosts`: a network namespace
per service with its own address and /tmp, on a bridge), in the same run; the hosts' figures
next to loopback's, as ratios.

The workload: `_LANES` sessions side by side, each submitting its tasks one after the other
through the gateway and following each to its end over the event stream (a client's view:
submit to final event). Two kinds of task: one code cell (model, tool worker, sandbox, model)
and model only (no tools). Each session's first task warms its sandbox and is not counted.
Both stacks run two agent workers and three tool workers, Docker sandboxes.
"""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from devstack.hosts import HostNetwork
from devstack.stack import LocalStack
from taskyard.client import TaskyardClient

__all__ = ["hosts_section"]

_LANES = 8
_NO_TOOLS = {"tools": []}


@dataclass(frozen=True)
class _Workload:
    """What one task of a lane asks: its text for task `n`, and the agent (None: default)."""

    text: Callable[[int], str]
    agent: dict[str, Any] | None = None


_WORKLOADS = {
    "one code cell": _Workload(lambda n: f"```python\nprint({n} * 2)\n```"),
    "model only": _Workload(lambda n: f"hello {n}", _NO_TOOLS),
}


@dataclass
class _Figures:
    latencies: list[float] = field(default_factory=list)  # submit to final event, seconds
    succeeded: int = 0
    tasks: int = 0
    makespan_s: float = 0.0

    @property
    def per_s(self) -> float:
        return self.tasks / self.makespan_s if self.makespan_s else 0.0

    @property
    def p50_ms(self) -> float:
        return statistics.median(self.latencies) * 1000 if self.latencies else float("nan")


def _task(client: TaskyardClient, session: str, work: _Workload, n: int) -> tuple[float, bool]:
    """One task, followed to its end; (seconds from submit to its final event, succeeded)."""
    start = time.perf_counter()
    task_id = client.submit(work.text(n), session_id=session, agent=work.agent)["id"]
    final = [e for e in client.events(task_id) if e.is_final][-1]
    return time.perf_counter() - start, final.data["status"] == "succeeded"


def _run(stack: LocalStack, label: str, work: _Workload, per_lane: int) -> _Figures:
    figures, lock = _Figures(), threading.Lock()
    ready = threading.Barrier(_LANES + 1)

    def lane(index: int) -> None:
        with TaskyardClient(stack.gateway_url, stack.api_key) as client:
            session = f"bench-hosts-{label.replace(' ', '-')}-{index}"
            try:
                _task(client, session, work, 0)  # warms its sandbox: not counted
            except BaseException:
                ready.abort()  # every lane and the section stop, loudly
                raise
            ready.wait(timeout=120)
            for n in range(1, per_lane + 1):
                took, ok = _task(client, session, work, n)
                with lock:
                    figures.latencies.append(took)
                    figures.succeeded += ok
                    figures.tasks += 1

    threads = [threading.Thread(target=lane, args=(i,)) for i in range(_LANES)]
    for thread in threads:
        thread.start()
    ready.wait(timeout=120)
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    figures.makespan_s = time.perf_counter() - began
    return figures


def _measure(on_hosts: bool, per_lane: int) -> dict[str, _Figures]:
    """Every workload on a fresh stack, on loopback or on hosts of their own."""
    stack = LocalStack(sandbox_backend="docker", agent_workers=2, tool_workers=3)
    with contextlib.ExitStack() as cleanup:
        if on_hosts:
            stack.hosts = cleanup.enter_context(HostNetwork(list(stack.commands()))).hosts
        stack.start()
        cleanup.callback(stack.stop)  # before the hosts go
        return {name: _run(stack, name, work, per_lane) for name, work in _WORKLOADS.items()}


def hosts_section(quick: bool) -> None:
    per_lane = 5 if quick else 15
    print("\n## Hosts, not processes: the same workload on loopback and on hosts of their own")
    print(f"{_LANES} sessions side by side, {per_lane} tasks each after a warm-up task; latency "
          "= submit to final event through the gateway. Hosts: each service in a network "
          "namespace of its own, on a bridge (devstack/hosts.py).")  # fmt: skip
    print("| workload | services on | tasks | ok | tasks/s | latency p50 | hosts / loopback |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    loopback, hosts = _measure(False, per_lane), _measure(True, per_lane)
    for name in _WORKLOADS:
        base, hosted = loopback[name], hosts[name]
        ratio = (f"{hosted.per_s / base.per_s:.2f}x tasks/s, "
                 f"{hosted.p50_ms / base.p50_ms:.2f}x p50")  # fmt: skip
        for where, got, compared in (("loopback", base, ""), ("hosts", hosted, ratio)):
            print(f"| {name} | {where} | {got.tasks} | {got.succeeded} | {got.per_s:.1f} | "
                  f"{got.p50_ms:.0f} ms | {compared} |")  # fmt: skip
