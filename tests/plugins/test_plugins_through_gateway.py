"""User code deployed by configuration alone: the example agent and action, named in a task,
run in the unchanged gateway and workers (plugin modules from TASKYARD_PLUGIN_MODULES)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from devstack.stack import LocalStack
from examples.custom_agent import SIGNATURE
from taskyard.client import TaskyardClient

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


def _ask_expert(task: str, session: str | None = None) -> str:
    arguments = {"task": task, **({"session_id": session} if session else {})}
    return f"```tool\n{json.dumps({'name': 'agent:unit_expert', 'arguments': arguments})}\n```"


def test_a_registered_agent_answers_as_another_agents_tool(client: TaskyardClient) -> None:
    task_id = client.submit(_ask_expert("How many metres is 3 feet?"),
                            agent={"tools": ["agent:unit_expert"]})["id"]  # fmt: skip
    kinds = [e.kind.value for e in client.events(task_id)]
    parent = client.get(task_id)
    assert parent["status"] == "succeeded", parent
    [child] = parent["children"]
    assert child["status"] == "succeeded" and child["session_id"] != parent["session_id"]
    done = client.get(child["id"])
    assert done["parent_id"] == task_id and done["result"].endswith(SIGNATURE)
    assert done["result"] in parent["result"]  # the child's answer came back as the result
    assert "child" in kinds  # the parent's stream showed the child's progress
    # The child's tokens count toward the parent's (its budget included).
    assert parent["usage"]["prompt_tokens"] > done["usage"]["prompt_tokens"] > 0


def test_cancelling_the_parent_cancels_its_children(client: TaskyardClient) -> None:
    # The child's session is held by a long cell, so the child waits there, queued.
    hold = "```python\nimport time\ntime.sleep(600)\n```"
    holder = client.submit(hold, session_id="expert-busy")["id"]
    task_id = client.submit(_ask_expert("3 feet in metres?", "expert-busy"),
                            agent={"tools": ["agent:unit_expert"]})["id"]  # fmt: skip
    deadline = time.monotonic() + 30
    while not (children := client.get(task_id)["children"]):
        assert time.monotonic() < deadline, "the child task was never started"
        time.sleep(0.1)
    client.http.post(f"/v1/tasks/{task_id}/cancel").raise_for_status()
    client.http.post(f"/v1/tasks/{holder}/cancel").raise_for_status()
    assert client.get(children[0]["id"])["status"] == "cancelled"
