"""The agent tier at scale, through the real stack: a thousand tasks at once all finish while
the model calls are in flight together (not one per worker thread), SSE followers share the
gateway's Redis connections, and a cancel stops a model call in flight.

Speed belongs to `bench/agent_tier_bench.py`; these tests assert behaviour only.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Iterator

import aiohttp
import httpx
import pytest
import redis
from e2e_support import wait_status

from devstack.stack import LocalStack
from shared import keys
from shared.client import TaskyardClient

pytestmark = pytest.mark.e2e

NO_TOOLS = {"tools": []}
_IN_FLIGHT = re.compile(r"^taskyard_proxy_replica_in_flight\{[^}]*\} (\d+)", re.MULTILINE)


@pytest.fixture(scope="module")
def stack(sandbox_image: str) -> Iterator[LocalStack]:
    # The scripted model stands in for a GPU server: the proxy lets every call through.
    env = {"TASKYARD_PROXY_MAX_IN_FLIGHT": "4096", "TASKYARD_PROXY_QUEUE_SIZE": "8192"}
    stack = LocalStack(sandbox_backend="docker", extra_env=env).start()
    yield stack
    stack.stop()


@pytest.fixture
def client(stack: LocalStack) -> Iterator[TaskyardClient]:
    client = TaskyardClient(stack.gateway_url, stack.api_key)
    yield client
    client.close()


def _configure_model(stack: LocalStack, **config: object) -> None:
    url = f"http://127.0.0.1:{stack.ports.model}/scripted/config"
    httpx.post(url, json=config, timeout=5).raise_for_status()


async def _submit(stack: LocalStack, bodies: list[dict]) -> list[str]:
    headers = {"Authorization": f"Bearer {stack.api_key}"}
    async with aiohttp.ClientSession(headers=headers) as http:
        gate = asyncio.Semaphore(32)

        async def one(body: dict) -> str:
            async with gate, http.post(f"{stack.gateway_url}/v1/tasks", json=body) as resp:
                assert resp.status == 202, await resp.text()
                return (await resp.json())["id"]

        return await asyncio.gather(*(one(body) for body in bodies))


class _PeakInFlight(threading.Thread):
    """Samples the proxy's model calls in flight until stopped; keeps the highest."""

    def __init__(self, stack: LocalStack) -> None:
        super().__init__(daemon=True)
        self.url = f"http://127.0.0.1:{stack.ports.proxy}/metrics"
        self.peak = 0
        self.done = threading.Event()

    def run(self) -> None:
        with httpx.Client(timeout=5) as http:
            while not self.done.wait(0.05):
                text = http.get(self.url).text
                self.peak = max([self.peak, *(int(n) for n in _IN_FLIGHT.findall(text))])


def _statuses(stack: LocalStack, ids: list[str]) -> list[str | None]:
    client = redis.Redis.from_url(f"{stack.redis_url}/0", decode_responses=True)
    with client.pipeline(transaction=False) as pipe:
        for task_id in ids:
            pipe.hget(keys.task(task_id), "status")
        return pipe.execute()


def test_a_thousand_tasks_at_once_all_succeed_with_their_calls_in_flight_together(
    stack: LocalStack,
) -> None:
    _configure_model(stack, latency_ms=1000)
    peak = _PeakInFlight(stack)
    peak.start()
    try:
        bodies = [{"input": f"hello {i}", "agent": NO_TOOLS} for i in range(1000)]
        ids = asyncio.run(_submit(stack, bodies))
        deadline = time.monotonic() + 240
        while (statuses := _statuses(stack, ids)).count("succeeded") < len(ids):
            ended = [s for s in statuses if s in {"failed", "cancelled", "timed_out"}]
            assert not ended, f"{len(ended)} tasks ended without success: {set(ended)}"
            assert time.monotonic() < deadline, f"{statuses.count('succeeded')} of 1000 done"
            time.sleep(0.5)
    finally:
        peak.done.set()
        peak.join()
        _configure_model(stack, latency_ms=0)
    # One worker process (gevent) holds far more model calls than the 16 threads it had.
    assert peak.peak >= 100, f"at most {peak.peak} model calls were in flight at once"


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
    _configure_model(stack, latency_ms=5000)
    try:
        first = client.submit("hello, slowly", session_id="cancel-flight", agent=NO_TOOLS)["id"]
        second = client.submit("and then", session_id="cancel-flight", agent=NO_TOOLS)["id"]
        wait_status(client, first, {"running"})
        time.sleep(0.5)  # the model call is in flight
        client.http.post(f"/v1/tasks/{first}/cancel").raise_for_status()
        _configure_model(stack, latency_ms=0)
        done = wait_status(client, second, timeout=20)
    finally:
        _configure_model(stack, latency_ms=0)
    assert done["status"] == "succeeded"
    cancelled = client.get(first)
    assert cancelled["status"] == "cancelled"
    assert [m["sender"] for m in cancelled["messages"]] == ["user"]  # its step never applied
