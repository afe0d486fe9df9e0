"""Warm sandboxes under a burst: how long a new session waits for its kernel (acquire: from
asking the provider to the first cell's answer, a trivial ``1``), with no pool (every session
starts a container: cold) and with the pool the settings give (sized to demand, refilled by
several starters at once: `PoolBounds.from_settings`).

Each configuration meets the same load: bursts of new sessions at `rate` per second for one
second, a pause between bursts, each session in its own thread (as tool-worker threads take
jobs). The Docker backend, on this machine's engine; sessions stay live until the end.
"""

from __future__ import annotations

import statistics
import threading
import time
import uuid
from dataclasses import dataclass

from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.sandbox.demand import PoolBounds
from taskyard.sandbox.docker.provider import DockerSandboxProvider
from taskyard.sandbox.provider import SandboxLimits

__all__ = ["warm_pool_section"]

_ROOMY = SandboxLimits(per_tenant=10_000, per_worker=10_000)  # no eviction in the way


def _acquire(provider: DockerSandboxProvider, key: str, into: list[float]) -> None:
    start = time.perf_counter()
    result = provider.get(key).run("1", 60)
    assert result.result == "1", result
    into.append(time.perf_counter() - start)


def _burst(provider: DockerSandboxProvider, rate: float, label: str) -> list[float]:
    """`rate` new sessions spread over one second; their acquire times, once all are in."""
    took: list[float] = []
    threads = []
    begin = time.perf_counter()
    for n in range(int(rate)):
        time.sleep(max(0.0, begin + n / rate - time.perf_counter()))
        thread = threading.Thread(target=_acquire, args=(provider, f"bench:{label}-{n}", took))
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join()
    return took


@dataclass
class _Burst:
    warm: int  # kernels waiting when it began
    took: list[float]  # acquire times
    refill_s: float | None  # until the pool held its target again (None: not in the pause)


def _run(bounds: PoolBounds, bursts: int, rate: float, pause_s: float) -> list[_Burst]:
    settings = ToolWorkerSettings(sandbox_worker_label=f"bench-{uuid.uuid4().hex[:8]}")
    provider = DockerSandboxProvider(settings, pool=bounds, limits=_ROOMY)
    try:
        time.sleep(pause_s)  # the pool's first kernels start, as after a worker's start-up
        figures = []
        for n in range(bursts):
            warm = provider.pool_state().ready
            took = _burst(provider, rate, f"{n}")
            figures.append(_Burst(warm, took, _refill(provider, pause_s)))
        return figures
    finally:
        provider.close_all()


def _refill(provider: DockerSandboxProvider, pause_s: float) -> float | None:
    """Wait out the pause; how soon in it the pool held its target, if it did."""
    start, refilled = time.perf_counter(), None
    while (elapsed := time.perf_counter() - start) < pause_s:
        state = provider.pool_state()
        if refilled is None and state.ready >= state.target and not state.starting:
            refilled = elapsed
        time.sleep(0.05)
    return refilled


def _ms(values: list[float], q: float) -> str:
    ordered = sorted(values)
    return f"{ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000:.0f}"


def warm_pool_section(quick: bool) -> None:
    rate, bursts, pause_s = 20.0, 2 if quick else 3, 8.0
    settings = ToolWorkerSettings()
    configs = {
        "no pool (cold)": PoolBounds.fixed(0),
        f"warm pool, {settings.sandbox_warm_pool} to {settings.sandbox_warm_pool_max} kernels, "
        f"{settings.sandbox_warm_starts} starters": PoolBounds.from_settings(settings),
    }
    print(f"\n## Warm sandboxes: acquire under bursts of {rate:.0f} new sessions per second")
    print(f"Docker backend; {bursts} one-second bursts, {pause_s:.0f} s apart; acquire = "
          "asking for a new session's sandbox to its first cell's answer.")  # fmt: skip
    print("| pool | burst | warm kernels waiting | acquire p50 | p90 | max | pool refilled in |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for label, bounds in configs.items():
        for n, burst in enumerate(_run(bounds, bursts, rate, pause_s), 1):
            took, refill = burst.took, burst.refill_s
            refilled = "-" if refill is None or not bounds.enabled else f"{refill:.1f} s"
            print(f"| {label} | {n} | {burst.warm} | **{statistics.median(took) * 1000:.0f} ms** "
                  f"| {_ms(took, 0.9)} ms | {max(took) * 1000:.0f} ms | {refilled} |")  # fmt: skip
