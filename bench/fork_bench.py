"""Forking a live session (`provider.fork`): median time for a session holding 0 MB and 100 MB
of numpy arrays, on the docker backend with one container per session and with the fork
server, beside the same run's start of a fresh session; and where a fork's time goes.

    .venv/bin/python bench/fork_bench.py [--forks 5]

Uses TASKYARD_SANDBOX_IMAGE (built by scripts/build_sandbox_image.sh). No warm pool for the
one-container backend, as in a worker whose pool just ran dry; the fork server keeps its
spares, as it always does.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.sandbox import interpreter_copy
from taskyard.sandbox.docker.provider import DockerSandboxProvider

SHAPES = {"one container a session": 1, "fork server": 8}
SIZES_MB = (0, 100)
# The copy's three parts, as `copy_interpreter` runs them: each step's function there.
STEPS = {"save": "_save", "files": "_copy_files", "load": "_load"}


def _median_ms(seconds: list[float]) -> str:
    return f"{statistics.median(seconds) * 1e3:8.1f} ms"


@contextmanager
def _steps_timed() -> Iterator[dict[str, list[float]]]:
    """Time each part of every fork meanwhile: the source's save (with its hand-over, on a
    fork server), the files' copy, the new session's load."""
    times: dict[str, list[float]] = {step: [] for step in STEPS}
    originals = {step: getattr(interpreter_copy, name) for step, name in STEPS.items()}

    def timed(step: str) -> Callable[..., Any]:
        def run(*args: Any) -> Any:
            start = time.perf_counter()
            try:
                return originals[step](*args)
            finally:
                times[step].append(time.perf_counter() - start)

        return run

    for step, name in STEPS.items():
        setattr(interpreter_copy, name, timed(step))
    try:
        yield times
    finally:
        for step, name in STEPS.items():
            setattr(interpreter_copy, name, originals[step])


def _timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def bench_shape(name: str, sessions: int, forks: int) -> None:
    settings = ToolWorkerSettings(
        sandbox_warm_pool=0,
        sandbox_memory="1g",  # 100 MB of arrays, their snapshot in /work, the copy's buffer
        sandbox_disk="512m",
        sandbox_sessions_per_container=sessions,
        sandbox_max_per_tenant=64,
        sandbox_worker_label=f"bench-{uuid.uuid4().hex[:8]}",
    )
    provider = DockerSandboxProvider(settings, pool_size=0)
    try:
        fresh = [_timed(lambda i=i: provider.get(f"b:fresh{i}").run("1", 60)) for i in range(forks)]
        for i in range(forks):
            provider.release(f"b:fresh{i}")
        print(f"{name:24} fresh session, first cell:        {_median_ms(fresh)}")
        for size in SIZES_MB:
            took, steps = _forks(provider, size, forks)
            parts = ", ".join(f"{step} {_median_ms(steps[step])}" for step in STEPS)
            print(f"{name:24} fork, {size:3} MB of arrays:         {_median_ms(took)}  ({parts})")
    finally:
        provider.close_all()


def _forks(
    provider: DockerSandboxProvider, size: int, forks: int
) -> tuple[list[float], dict[str, list[float]]]:
    """Fork a session holding `size` MiB of arrays `forks` times: each fork's time, and its
    parts'. Each fork is checked (its arrays' sum), then released."""
    source = f"b:source{size}"
    cell = f"import numpy as np\na, b = np.ones({size} << 16), np.ones({size} << 16)"
    assert provider.get(source).run(cell, 120).error is None  # `size` MiB, in two arrays
    took: list[float] = []
    with _steps_timed() as steps:
        for i in range(forks):
            new = f"b:fork{size}-{i}"
            took.append(_timed(lambda new=new: provider.fork(source, new)))
            total = provider.get(new).run("a.sum() + b.sum()", 60).result
            assert total == str(float(size << 17)), total
            provider.release(new)
    provider.release(source)
    return took, steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--forks", type=int, default=5, help="forks timed per figure")
    args = parser.parse_args()
    for name, sessions in SHAPES.items():
        bench_shape(name, sessions, args.forks)


if __name__ == "__main__":
    main()
