"""Sandbox figures: image build from scratch, session start, per-call latency. Prints medians.

    .venv/bin/python bench/sandbox_bench.py [--calls 200] [--build]

`--build` times scripts/build_sandbox_image.sh from scratch under throw-away tags (debootstrap
included), so the images other runs use are never touched.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import docker

from shared.sandbox import LocalSandboxProvider
from shared.sandbox.docker import DockerSandboxProvider
from shared.sandbox.provider import KernelSandboxProvider
from shared.settings import Settings

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--build", action="store_true", help="time an image build from scratch")
    args = parser.parse_args()
    if args.build:
        bench_build()
    settings = Settings(sandbox_warm_pool=0)
    providers: dict[str, Callable[[int], KernelSandboxProvider]] = {
        "docker": lambda pool: DockerSandboxProvider(settings, pool_size=pool),
        "bwrap": lambda pool: LocalSandboxProvider(settings, launcher="bwrap", pool_size=pool),
    }
    for name, make in providers.items():
        bench_provider(name, make, args.calls)


if __name__ == "__main__":
    main()
