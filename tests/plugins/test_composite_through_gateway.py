"""A registered composite agent (a writer and a critic, each with its own memory, and a round
counter) runs three tasks in one session through the gateway, with the agent worker
restarted before the third: every sub-agent's memory and the counter round-trip through
Redis, as the scripted model's view and GET /v1/sessions/{id} show."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from devstack.stack import LocalStack
from taskyard.client import TaskyardClient

pytestmark = pytest.mark.e2e

PLUGINS = {"TASKYARD_PLUGIN_MODULES": "tests.plugins.composite_agents"}


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    stack = LocalStack(sandbox_backend="local", extra_env=PLUGINS).start()
    yield stack
    stack.stop()


def _run(client: TaskyardClient, text: str) -> str:
    task_id = client.submit(text, session_id="essay", agent={"agent": "writer_critic"})["id"]
    list(client.events(task_id))
    task = client.get(task_id)
    assert task["status"] == "succeeded", task
    return task["result"]


def test_a_composite_agents_whole_state_persists_across_tasks(stack: LocalStack) -> None:
    client = TaskyardClient(stack.gateway_url, stack.api_key)
    results = [_run(client, "first"), _run(client, "second")]
    stack.kill("agent_worker")  # the next step is loaded from Redis by a fresh process
    stack.restart("agent_worker")
    results.append(_run(client, "third"))
    # What the model was sent: each sub-agent saw its own earlier turns (1, 3, 5 messages).
    seen = [[int(n) for n in re.findall(r"\[(\d+) messages\]", r)] for r in results]
    assert seen == [[1, 1], [3, 3], [5, 5]]
    assert [r.split(":")[0] for r in results] == ["round 1", "round 2", "round 3"]

    session = client.http.get("/v1/sessions/essay").raise_for_status().json()
    assert session["memories"] == {"memory": 6, "writer.memory": 6, "critics.0.memory": 6}
    assert session["values"] == {"rounds": {"count": 3}}
    critic = client.http.get("/v1/sessions/essay", params={"memory": "critics.0.memory"}).json()
    assert [m["sender"] for m in critic["messages"]] == ["writer", "critic"] * 3
    assert critic["messages"][-1]["content"].startswith("[5 messages]")
    client.close()
