"""A task that stays quiet longer than the gateway's keep-alive interval, after its first
event: the stream carries keep-alive comments between events, and every reader of it (the
Python client and its async twin, the CLI) follows it to the end. (httpx-sse yields the blank
line after such a comment as an event with no data; the client crashed decoding it.)"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from e2e_support import configure_model

from devstack.cli import DEMO_TASK
from devstack.stack import LocalStack
from taskyard.client import AsyncTaskyardClient, TaskyardClient
from tests.dev_install import taskyard_cli

pytestmark = pytest.mark.e2e

KEEP_ALIVE_S = 0.2
MODEL_LATENCY_MS = 1000  # five keep-alives' worth of silence before each model reply


@pytest.fixture(scope="module")
def stack(sandbox_image: str) -> Iterator[LocalStack]:
    env = {"TASKYARD_GATEWAY_SSE_KEEP_ALIVE_S": str(KEEP_ALIVE_S)}
    stack = LocalStack(sandbox_backend="docker", extra_env=env).start()
    configure_model(stack, latency_ms=MODEL_LATENCY_MS)
    yield stack
    stack.stop()


def test_the_stream_has_keep_alives_between_events(stack: LocalStack) -> None:
    headers = {"Authorization": f"Bearer {stack.api_key}"}
    with httpx.Client(base_url=stack.gateway_url, headers=headers, timeout=30) as http:
        task_id = http.post("/v1/tasks", json={"input": DEMO_TASK}).json()["id"]
        raw = http.get(f"/v1/tasks/{task_id}/events").text
    first_id = raw.index("\nid: ") if raw.startswith(":") else raw.index("id: ")
    between = raw[first_id:].count(": keep-alive\n\n")
    assert between >= 2, raw[:500]
    assert re.search(r'"status": ?"succeeded"', raw)


def test_the_client_follows_a_quiet_task_to_its_end(client: TaskyardClient) -> None:
    task_id = client.submit(DEMO_TASK)["id"]
    events = list(client.events(task_id))
    assert events[-1].is_final and events[-1].data["status"] == "succeeded"
    assert all(event.data for event in events)


async def test_the_async_client_follows_a_quiet_task_to_its_end(stack: LocalStack) -> None:
    async with AsyncTaskyardClient(stack.gateway_url, stack.api_key) as client:
        task_id = (await client.submit(DEMO_TASK))["id"]
        events = [event async for event in client.events(task_id)]
    assert events[-1].is_final and events[-1].data["status"] == "succeeded"


def test_the_cli_prints_a_quiet_task_to_its_answer(stack: LocalStack, tmp_path: Path) -> None:
    env = {"TASKYARD_URL": stack.gateway_url, "TASKYARD_API_KEY": stack.api_key}
    result = taskyard_cli(tmp_path, "submit", DEMO_TASK, **env)
    assert result.returncode == 0, result.stderr
    assert "1.414213562373" in result.stdout
    assert "status: succeeded" in result.stdout
