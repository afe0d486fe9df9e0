"""User code deployed by configuration alone: the example agent and action, named in a task,
run in the unchanged gateway and workers (plugin modules from TASKYARD_PLUGIN_MODULES)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from examples.custom_agent import SIGNATURE
from services.stack import LocalStack
from shared.client import TaskyardClient

pytestmark = pytest.mark.e2e

CALL = {
    "name": "UnitConverter.temperature",
    "arguments": {"value": 100, "from_unit": "C", "to_unit": "F"},
}


@pytest.fixture(scope="module")
def client(sandbox_image: str) -> Iterator[TaskyardClient]:
    env = {"TASKYARD_PLUGIN_MODULES": "examples.custom_agent,examples.custom_action"}
    stack = LocalStack(
        extra_env=env, tool_queues=("tools.IPythonInterpreter", "tools.UnitConverter")
    ).start()
    client = TaskyardClient(stack.gateway_url, stack.api_key)
    yield client
    client.close()
    stack.stop()


def test_registered_agent_and_action_run_a_task(client: TaskyardClient) -> None:
    text = f"Boiling point in F?\n```tool\n{json.dumps(CALL)}\n```"
    task_id = client.submit(text, agent={"agent": "unit_expert"})["id"]
    events = list(client.events(task_id))
    task = client.get(task_id)
    assert events[-1].data["status"] == "succeeded", task
    _, call, tool, _ = task["messages"]
    assert call["sender"] == "unit_expert"
    assert call["formatted"]["tool_calls"][0]["name"] == "UnitConverter.temperature"
    assert tool["content"]["result"][0]["content"] == "100 C = 212 F"
    assert "212 F" in task["result"] and task["result"].endswith(SIGNATURE)


def test_unknown_registered_agent_is_refused(client: TaskyardClient) -> None:
    resp = client.http.post("/v1/tasks", json={"input": "x", "agent": {"agent": "nobody"}})
    assert resp.status_code == 422
    assert "unknown agent 'nobody'" in resp.json()["detail"][0]["msg"]
