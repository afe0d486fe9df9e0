"""Forking a live session (`provider.fork`): median time for a session holding 0 MB and 100 MB
of numpy arrays, on the docker backend with one container per session and with the fork
server, beside the same run's start of a fresh session; where a fork's time goes; and until
the new session's first cell answered (on a fork server the snapshot is written and loaded
behind the fork's answer, and that cell waits for it).

    .venv/bin/python bench/fork_bench.py [--forks 5] [--only provider,gateway]

`provider` times `provider.fork` in this process; `gateway` times `POST
/v1/sessions/{id}/fork` on a local stack (devstack's `LocalStack`, Docker sandboxes, the fork
server; a session's arrays made by a task's cell), answer to answer, and a cell in the new
session right after (a task, through the agent worker).

Uses TASKYARD_SANDBOX_IMAGE (built by scripts/build_sandbox_image.sh). No warm pool for the
one-container backend, as in a worker whose pool just ran dry; the fork server keeps its
spares, as it always does.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _stackbench import configure_model

from devstack.stack import LocalStack
from taskyard.client import TaskyardClient
from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.sandbox import interpreter_copy
from taskyard.sandbox.docker.provider import DockerSandboxProvider

SHAPES = {"one container a session": 1, "fork server": 8}
ENDED = {"succeeded", "failed", "cancelled", "expired"}
SIZES_MB = (0, 100)
# The parts of the copy `copy_interpreter` runs before it answers: each step's function there.
STEPS = {"save": "_save", "files": "_copy_files"}


def _median_ms(seconds: list[float]) -> str:
    return f"{statistics.median(seconds) * 1e3:8.1f} ms"


@contextmanager
def _steps_timed() -> Iterator[dict[str, list[float]]]:
    """Time each part of every fork meanwhile: the source's save (with its hand-over, on a
    fork server), the files' copy."""
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
            took, first, steps = _forks(provider, size, forks)
            parts = ", ".join(f"{step} {_median_ms(steps[step])}" for step in STEPS)
            print(f"{name:24} fork, {size:3} MB of arrays:         {_median_ms(took)}  ({parts};"
                  f" with the new session's first cell {_median_ms(first)})")  # fmt: skip
    finally:
        provider.close_all()


def _forks(
    provider: DockerSandboxProvider, size: int, forks: int
) -> tuple[list[float], list[float], dict[str, list[float]]]:
    """Fork a session holding `size` MiB of arrays `forks` times: each fork's time, with its
    new session's first cell (which checks the arrays' sum), and its parts'."""
    source = f"b:source{size}"
    cell = f"import numpy as np\na, b = np.ones({size} << 16), np.ones({size} << 16)"
    assert provider.get(source).run(cell, 120).error is None  # `size` MiB, in two arrays
    took: list[float] = []
    first: list[float] = []
    with _steps_timed() as steps:
        for i in range(forks):
            new = f"b:fork{size}-{i}"
            start = time.perf_counter()
            provider.fork(source, new)
            took.append(time.perf_counter() - start)
            total = provider.get(new).run("a.sum() + b.sum()", 60).result
            first.append(time.perf_counter() - start)
            assert total == str(float(size << 17)), total
            provider.release(new)
    provider.release(source)
    return took, first, steps


def provider_section(forks: int) -> None:
    for name, sessions in SHAPES.items():
        bench_shape(name, sessions, forks)


def gateway_section(forks: int) -> None:
    stack = LocalStack(sandbox_backend="docker").start()
    try:
        configure_model(stack, latency_ms=0)
        client = TaskyardClient(stack.gateway_url, stack.api_key)
        for size in SIZES_MB:
            source = f"fork-bench-{size}"
            cell = f"import numpy as np\na, b = np.ones({size} << 16), np.ones({size} << 16)"
            _task_cell(client, source, cell)
            took, first = [], []
            for i in range(forks):
                start = time.perf_counter()
                forked = client.fork_session(source, f"{source}-fork{i}")
                took.append(time.perf_counter() - start)
                assert forked["interpreter"] == "copied", forked
                said = _task_cell(client, f"{source}-fork{i}", "print(a.sum() + b.sum())")
                first.append(time.perf_counter() - start)
                assert str(float(size << 17)) in said, said
            print(f"gateway                  POST fork, {size:3} MB of arrays:    "
                  f"{_median_ms(took)}  (with a task's cell in the new session "
                  f"{_median_ms(first)})")  # fmt: skip
    finally:
        stack.stop()


def _task_cell(client: TaskyardClient, session: str, code: str) -> str:
    """Run `code` as a task's one cell in `session`; the ended task, as text."""
    task = client.submit(f"```python\n{code}\n```", session_id=session)
    deadline = time.monotonic() + 120
    while (task := client.get(task["id"]))["status"] not in ENDED:
        assert time.monotonic() < deadline, task
        time.sleep(0.005)
    assert task["status"] == "succeeded", task
    return str(task["messages"][2])


SECTIONS = {"provider": provider_section, "gateway": gateway_section}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--forks", type=int, default=5, help="forks timed per figure")
    parser.add_argument("--only", default=",".join(SECTIONS), help="sections, comma-separated")
    args = parser.parse_args()
    for name in args.only.split(","):
        SECTIONS[name](args.forks)


if __name__ == "__main__":
    main()
