"""What the agent-tier benchmark does to a running local stack: configure the scripted
model, submit tasks at once through the gateway, watch them end in Redis, read a process's
memory."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import redis

from devstack.stack import LocalStack
from taskyard.plumbing import keys

__all__ = ["Burst", "configure_model", "peak_rss_kb", "rss_kb", "submit_burst", "wait_ended"]

_ENDED = {"succeeded", "failed", "cancelled", "timed_out"}


def configure_model(stack: LocalStack, **options: Any) -> None:
    url = f"{stack.model_url}/scripted/config"
    httpx.post(url, json=options, timeout=5).raise_for_status()


def _status_kb(pid: int, field_name: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field_name} for pid {pid}")


def rss_kb(pid: int) -> int:
    return _status_kb(pid, "VmRSS")


def peak_rss_kb(pid: int) -> int:
    return _status_kb(pid, "VmHWM")


@dataclass
class Burst:
    """Tasks submitted at once: their ids, when submission started and ended."""

    ids: list[str] = field(default_factory=list)
    started: float = 0.0
    submitted: float = 0.0
    errors: int = 0


async def _submit_all(url: str, key: str, bodies: list[dict], connections: int) -> Burst:
    burst = Burst(started=time.perf_counter())
    headers = {"Authorization": f"Bearer {key}"}
    queue: asyncio.Queue[dict] = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)
    async with aiohttp.ClientSession(headers=headers) as http:

        async def sender() -> None:
            while not queue.empty():
                body = queue.get_nowait()
                async with http.post(f"{url}/v1/tasks", json=body) as resp:
                    if resp.status == 202:
                        burst.ids.append((await resp.json())["id"])
                    else:
                        burst.errors += 1

        await asyncio.gather(*(sender() for _ in range(connections)))
    burst.submitted = time.perf_counter()
    return burst


def submit_burst(stack: LocalStack, bodies: list[dict], connections: int = 32) -> Burst:
    """POST every body to the gateway from `connections` clients at once."""
    return asyncio.run(_submit_all(stack.gateway_url, stack.api_key, bodies, connections))


def wait_ended(stack: LocalStack, ids: list[str], timeout_s: float) -> dict[str, Any]:
    """Wait until every task has ended; when the last one did and how.

    While tasks run, one `ZCARD` of the live index every 20 ms (a task is in it from its
    create to its end): polling each task's status instead cost the benchmark about 0.9
    CPU-ms a task on the very cores it measures (1,000 `HGET`s every 20 ms). The statuses
    are then read once (and polled, should one not have ended)."""
    client = redis.Redis.from_url(f"{stack.redis_url}/0", decode_responses=True)
    deadline = time.perf_counter() + timeout_s
    try:
        while client.zcard(keys.LIVE_TASKS) and time.perf_counter() < deadline:
            time.sleep(0.02)
        return _ended(client, ids, deadline)
    finally:
        client.close()


def _ended(client: redis.Redis, ids: list[str], deadline: float) -> dict[str, Any]:
    waiting, statuses = set(ids), {}
    while waiting:
        pipe = client.pipeline(transaction=False)
        batch = list(waiting)
        for task_id in batch:
            pipe.hget(keys.task(task_id), "status")
        for task_id, status in zip(batch, pipe.execute(), strict=True):
            if status in _ENDED:
                statuses[task_id] = status
                waiting.discard(task_id)
        if not waiting or time.perf_counter() >= deadline:
            break
        time.sleep(0.02)
    counts: dict[str, int] = {}
    for status in statuses.values():
        counts[status] = counts.get(status, 0) + 1
    return {"ended_at": time.perf_counter(), "counts": counts, "stuck": len(waiting)}
