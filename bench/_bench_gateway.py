"""The gateway alone: tasks accepted per second, and a thousand live SSE followers on one
process with the Redis connections they cost.

The workers are stopped, so every accepted task stays queued: the figures are the gateway's
(and Redis's) own.
"""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp
import redis
from _loadgen_client import post_load
from _stackbench import submit_burst

from devstack.stack import LocalStack

__all__ = ["gateway_section"]


def _redis_clients(stack: LocalStack) -> int:
    """The gateway's connections to Redis (its clients are named)."""
    client = redis.Redis.from_url(stack.redis_url, decode_responses=True)
    try:
        return sum(c["name"] == "taskyard-gateway" for c in client.client_list())
    finally:
        client.close()


async def _follow_all(stack: LocalStack, ids: list[str]) -> dict[str, float]:
    """Open one SSE stream per task, then cancel every task: how many streams saw their task
    end, how long the fan-out took, and the Redis connections open while all were held."""
    headers = {"Authorization": f"Bearer {stack.api_key}"}
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=120)
    async with aiohttp.ClientSession(headers=headers, connector=connector, timeout=timeout) as http:
        opened = asyncio.Event()
        streams: list[aiohttp.ClientResponse] = []

        async def follow(task_id: str) -> bool:
            async with http.get(f"{stack.gateway_url}/v1/tasks/{task_id}/events") as resp:
                streams.append(resp)
                if len(streams) == len(ids):
                    opened.set()
                async for line in resp.content:
                    if line.startswith(b"data: ") and b'"cancelled"' in line:
                        return True
            return False

        followers = [asyncio.create_task(follow(task_id)) for task_id in ids]
        await asyncio.wait_for(opened.wait(), 120)
        await asyncio.sleep(1.0)  # every follower caught up and is waiting live
        held = _redis_clients(stack)
        start = time.perf_counter()
        for task_id in ids:
            async with http.post(f"{stack.gateway_url}/v1/tasks/{task_id}/cancel") as resp:
                await resp.read()
        ended = await asyncio.gather(*followers)
        return {"ended": sum(ended), "fan_out_s": time.perf_counter() - start, "held": held}


def gateway_section(quick: bool) -> None:
    followers = 300 if quick else 1000
    stack = LocalStack(sandbox_backend="local").start()
    try:
        stack.kill("agent_worker")
        stack.kill("tool_worker")
        body = json.dumps({"input": "hi", "agent": {"tools": []}})
        load = post_load(stack, body, connections=16, seconds=3 if quick else 8)
        baseline = _redis_clients(stack)
        burst = submit_burst(stack, [{"input": f"follow {i}"} for i in range(followers)], 32)
        sse = asyncio.run(_follow_all(stack, burst.ids))
    finally:
        stack.stop()
    print("\n## Gateway (one process; workers stopped, so tasks stay queued)")
    print("| | figure |")
    print("| --- | --- |")
    print(f"| accepted tasks/s, 16 clients ({load['tool']}) | **{load['rps']:.0f}** "
          f"(p50 {load['p50_ms']:.1f} ms, {load['errors']} errors) |")  # fmt: skip
    print(f"| SSE followers held at once | {len(burst.ids)} |")
    print(f"| the gateway's Redis connections, before / while holding them | "
          f"{baseline} / **{sse['held']}** |")  # fmt: skip
    print(f"| followers that saw their task's end after a cancel of each | {sse['ended']} |")
    print(f"| time from the first cancel to the last follower's end | {sse['fan_out_s']:.2f} s |")
