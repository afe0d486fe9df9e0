"""The agent tier at scale, through the real stack: a thousand tasks at once all finish while
the model calls are in flight together (not one per worker thread), SSE followers share the
gateway's Redis connections, and a cancel stops a model call in flight.

Speed belongs to `bench/agent_tier_bench.py`; these tests assert behaviour only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import aiohttp
import httpx
import pytest
import redis
from e2e_support import configure_model, wait_status

from devstack.stack import LocalStack
from taskyard.client import TaskyardClient
from taskyard.plumbing import keys

pytestmark = pytest.mark.e2e

NO_TOOLS = {"tools": []}


@pytest.fixture(scope="module")
def stack(sandbox_image: str) -> Iterator[LocalStack]:
    # The scripted model stands in for a GPU server: the proxy lets every call through.
    env = {"TASKYARD_PROXY_MAX_IN_FLIGHT": "4096", "TASKYARD_PROXY_QUEUE_SIZE": "8192"}
    stack = LocalStack(sandbox_backend="docker", extra_env=env).start()
    yield stack
    stack.stop()


async def _submit(stack: LocalStack, bodies: list[dict]) -> list[str]:
    headers = {"Authorization": f"Bearer {stack.api_key}"}
    async with aiohttp.ClientSession(headers=headers) as http:
        gate = asyncio.Semaphore(32)

        async def one(body: dict) -> str:
            async with gate, http.post(f"{stack.gateway_url}/v1/tasks", json=body) as resp:
                assert resp.status == 202, await resp.text()
                return (await resp.json())["id"]

        return await asyncio.gather(*(one(body) for body in bodies))


def _statuses(stack: LocalStack, ids: list[str]) -> list[str | None]:
    client = redis.Redis.from_url(f"{stack.redis_url}/0", decode_responses=True)
    with client.pipeline(transaction=False) as pipe:
        for task_id in ids:
            pipe.hget(keys.task(task_id), "status")
        return pipe.execute()


def _model_stats(stack: LocalStack) -> dict[str, int]:
    url = f"http://127.0.0.1:{stack.ports.model}/scripted/stats"
    stats: dict[str, int] = httpx.get(url, timeout=5).json()
    return stats


def test_one_agent_worker_keeps_a_thousand_model_calls_in_flight_at_once(
    stack: LocalStack,
) -> None:
    # The model answers no call until a thousand wait on it together: a worker that cannot
    # hold a thousand calls at once never fills the batch, and its tasks never finish.
    configure_model(stack, hold_until=1000)
    try:
        bodies = [{"input": f"hello {i}", "agent": NO_TOOLS} for i in range(1000)]
        ids = asyncio.run(_submit(stack, bodies))
        deadline = time.monotonic() + 240
        while (statuses := _statuses(stack, ids)).count("succeeded") < len(ids):
            ended = [s for s in statuses if s in {"failed", "cancelled", "timed_out"}]
            assert not ended, f"{len(ended)} tasks ended without success: {set(ended)}"
            held = _model_stats(stack)["peak_held"]
            assert time.monotonic() < deadline, f"at most {held} model calls held at once"
            time.sleep(0.5)
    finally:
        configure_model(stack, hold_until=None)
    assert _model_stats(stack)["peak_held"] == 1000


async def _follow(stack: LocalStack, ids: list[str]) -> tuple[int, int]:
    """Hold one SSE stream per task; the Redis connections while all are held, and how many
    streams then saw their task's end."""
    headers = {"Authorization": f"Bearer {stack.api_key}"}
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(headers=headers, connector=connector) as http:
        opened: list[bool] = []

        async def follow(task_id: str) -> bool:
            async with http.get(f"{stack.gateway_url}/v1/tasks/{task_id}/events") as resp:
                opened.append(True)
                async for line in resp.content:
                    if line.startswith(b"data: ") and b'"cancelled"' in line:
                        return True
            return False

        followers = [asyncio.create_task(follow(task_id)) for task_id in ids]
        while len(opened) < len(ids):
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)
        listed = redis.Redis.from_url(stack.redis_url, decode_responses=True).client_list()
        gateway = [c for c in listed if c["name"] == "taskyard-gateway"]
        for task_id in ids:
            async with http.post(f"{stack.gateway_url}/v1/tasks/{task_id}/cancel") as resp:
                assert resp.status == 200
        ended = await asyncio.wait_for(asyncio.gather(*followers), 120)
        return len(gateway), sum(ended)


def test_sse_followers_share_the_gateways_redis_connections(stack: LocalStack) -> None:
    # Queued behind one long task, so every stream stays open until its cancel.
    blocker = asyncio.run(_submit(stack, [{"input": "```python\nimport time\ntime.sleep(30)\n```",
                                           "session_id": "sse-crowd"}]))  # fmt: skip
    bodies = [{"input": f"wait {i}", "session_id": "sse-crowd"} for i in range(300)]
    ids = asyncio.run(_submit(stack, bodies))
    try:
        connections, ended = asyncio.run(_follow(stack, ids))
    finally:
        httpx.post(f"{stack.gateway_url}/v1/tasks/{blocker[0]}/cancel",
                   headers={"Authorization": f"Bearer {stack.api_key}"})  # fmt: skip
    assert ended == len(ids)
    # One connection reads every stream; the rest is the gateway's bounded pool (64).
    assert connections <= 65, f"the gateway held {connections} Redis connections for 300 streams"


def test_a_cancel_stops_the_model_call_in_flight_and_the_session_goes_on(
    stack: LocalStack, client: TaskyardClient
) -> None:
    configure_model(stack, latency_ms=5000)
    try:
        first = client.submit("hello, slowly", session_id="cancel-flight", agent=NO_TOOLS)["id"]
        second = client.submit("and then", session_id="cancel-flight", agent=NO_TOOLS)["id"]
        wait_status(client, first, {"running"})
        time.sleep(0.5)  # the model call is in flight
        client.http.post(f"/v1/tasks/{first}/cancel").raise_for_status()
        configure_model(stack, latency_ms=0)
        done = wait_status(client, second, timeout=20)
    finally:
        configure_model(stack, latency_ms=0)
    assert done["status"] == "succeeded"
    cancelled = client.get(first)
    assert cancelled["status"] == "cancelled"
    assert [m["sender"] for m in cancelled["messages"]] == ["user"]  # its step never applied
