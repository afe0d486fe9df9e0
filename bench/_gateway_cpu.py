"""CPU per task of every process of the local stack while clients run 2-step tasks through the
gateway (POST /v1/tasks, then its events over SSE until the final status), and tasks/s.

With a baseline, a second gateway from another commit runs beside the stack's on the same
Redis and workers, and the rounds alternate between the two: the machine is shared and noisy,
so only figures from the same run, interleaved, compare well.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path

import aiohttp
import orjson
from _cpu import tree_cpu_s

from devstack.procs import ROOT, Child, ChildFailed, Processes, free_port
from devstack.stack import LocalStack

__all__ = ["Gateway", "Round", "baseline_gateway", "median_row", "run_rounds"]

TASK = "```python\nprint(1)\n```"  # the model calls the tool with it, then answers
_FINAL = {"succeeded", "failed", "cancelled", "timed_out"}


@dataclass(frozen=True)
class Gateway:
    name: str
    url: str
    pid: int


@dataclass
class Round:
    """One batch of tasks through one gateway: CPU ms per task per process, and tasks/s."""

    gateway: str
    tasks: int
    tasks_per_s: float
    events_per_task: float
    cpu_ms: dict[str, float] = field(default_factory=dict)


async def _one_task(http: aiohttp.ClientSession, url: str, session: str) -> int:
    """Submit a task, follow its events to the final status; the number of events."""
    async with http.post(f"{url}/v1/tasks", json={"input": TASK, "session_id": session}) as resp:
        assert resp.status == 202, await resp.text()
        task_id = (await resp.json())["id"]
    events, kind = 0, ""
    async with http.get(f"{url}/v1/tasks/{task_id}/events") as resp:
        assert resp.status == 200, await resp.text()
        async for line in resp.content:
            if line.startswith(b"event: "):
                kind = line[7:].strip().decode()
            elif line.startswith(b"data: "):
                events += 1
                if kind == "status" and orjson.loads(line[6:])["status"] in _FINAL:
                    return events
    raise RuntimeError(f"{task_id}: the stream ended before the task")


async def _run(url: str, key: str, tasks: int, clients: int, tag: str) -> tuple[float, int]:
    headers = {"Authorization": f"Bearer {key}"}
    left = [tasks]
    counts: list[int] = []
    async with aiohttp.ClientSession(headers=headers) as http:

        async def client(index: int) -> None:
            while left[0] > 0:
                left[0] -= 1
                counts.append(await _one_task(http, url, f"cpu-{tag}-{index}"))

        start = time.perf_counter()
        await asyncio.gather(*(client(i) for i in range(clients)))
        return time.perf_counter() - start, sum(counts)


def _cpu(stack: LocalStack, gateways: list[Gateway]) -> dict[str, float]:
    pids = {g.pid for g in gateways}
    own = {name: tree_cpu_s(proc.pid) for name, proc in stack.procs.items() if proc.pid not in pids}
    return {**own, **{g.name: tree_cpu_s(g.pid) for g in gateways}}


def run_rounds(
    stack: LocalStack, gateways: list[Gateway], tasks: int, clients: int, rounds: int
) -> list[Round]:
    """`rounds` batches of `tasks` per gateway, alternating (after a warm-up of each)."""
    tags = {gateway.name: f"g{index}" for index, gateway in enumerate(gateways)}  # sessions
    for gateway in gateways:
        asyncio.run(_run(gateway.url, stack.api_key, clients * 2, clients, tags[gateway.name]))
    results = []
    for index in range(rounds):
        order = gateways if index % 2 == 0 else gateways[::-1]
        for gateway in order:
            before = _cpu(stack, gateways)
            run = _run(gateway.url, stack.api_key, tasks, clients, tags[gateway.name])
            elapsed, events = asyncio.run(run)
            after = _cpu(stack, gateways)
            cpu = {name: (after[name] - before[name]) * 1000 / tasks for name in after}
            results.append(Round(gateway.name, tasks, tasks / elapsed, events / tasks, cpu))
    return results


def median_row(rounds: list[Round], gateway: str) -> tuple[float, float, dict[str, float]]:
    """Median tasks/s, events per task and CPU ms per task per process of one gateway's
    rounds; its own CPU under the key "gateway"."""
    mine = [r for r in rounds if r.gateway == gateway]
    cpu = {name: statistics.median(r.cpu_ms[name] for r in mine) for name in mine[0].cpu_ms}
    cpu = {("gateway" if name == gateway else name): ms for name, ms in cpu.items()}
    return (
        statistics.median(r.tasks_per_s for r in mine),
        statistics.median(r.events_per_task for r in mine),
        cpu,
    )


def baseline_gateway(stack: LocalStack, commit: str) -> tuple[Child, Gateway]:
    """The gateway of `commit` (exported from git, this checkout untouched), started as the
    stack starts its own, on the stack's Redis; stop it with `Child.stop`."""
    tree = Path(tempfile.mkdtemp(prefix="taskyard-baseline-"))
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, capture_output=True, check=True)
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(tree, filter="data")
    port = free_port()
    argv = [sys.executable, "-m", "uvicorn", "services.gateway.app:app", "--host", "127.0.0.1",
            "--port", str(port), "--no-access-log", "--workers", "1"]  # fmt: skip
    child = Processes(log_dir=stack.run_dir).start("baseline-gateway", argv, stack.env(), tree)
    url = f"http://127.0.0.1:{port}"
    try:
        child.wait_http(f"{url}/readyz")
    except ChildFailed:
        child.stop()
        raise
    return child, Gateway(f"baseline {commit}", url, child.pid)
