"""End to end: every service as its own process (Redis, scripted model, LLM proxy, gateway,
agent worker, tool worker with the Docker sandbox), driven over HTTP like a user would."""

from __future__ import annotations

import time

import docker
import pytest
import redis
from e2e_support import wait_status

from devstack.cli import DEMO_TASK
from devstack.stack import LocalStack
from taskyard.agentkit.schema import ActionReturn, AgentMessage
from taskyard.client import TaskyardClient
from taskyard.runtime.events import Event, EventKind

pytestmark = pytest.mark.e2e


def _wait_for_exited_sandboxes() -> None:
    engine = docker.from_env()
    filters = {"label": "taskyard.session", "status": "exited"}
    deadline = time.monotonic() + 20
    while not engine.containers.list(all=True, filters=filters):
        assert time.monotonic() < deadline, "a killed worker's sandboxes never exited"
        time.sleep(0.2)
    engine.close()


def _run(client: TaskyardClient, text: str, **kw: object) -> tuple[dict, list[Event]]:
    task_id = client.submit(text, **kw)["id"]
    events = list(client.events(task_id))
    return client.get(task_id), events


def _messages(events: list[Event]) -> list[AgentMessage]:
    return [AgentMessage.model_validate(e.data) for e in events if e.kind == EventKind.MESSAGE]


def _tool_output(message: AgentMessage) -> str:
    assert isinstance(message.content, ActionReturn)
    return message.content.format_result() + (message.content.errmsg or "")


def test_demo_task_transcript(client: TaskyardClient) -> None:
    task, events = _run(client, DEMO_TASK)
    user, call, tool, answer = _messages(events)
    assert user.content == DEMO_TASK
    calls = call.formatted["tool_calls"]
    assert [c["name"] for c in calls] == ["IPythonInterpreter"]
    assert "sqrt" in calls[0]["parameters"]["command"]
    assert tool.extra_info == {"tool_call_id": calls[0]["id"]}
    assert _tool_output(tool).strip() == "1.414213562373"
    assert "1.414213562373" in answer.content
    assert events[-1].data["status"] == "succeeded"
    assert task["status"] == "succeeded" and "1.414213562373" in task["result"]
    assert task["usage"]["prompt_tokens"] > 0 and task["usage"]["completion_tokens"] > 0
    assert task["messages"] == [m.model_dump(mode="json") for m in (user, call, tool, answer)]


def test_session_keeps_memory_and_interpreter(client: TaskyardClient, stack: LocalStack) -> None:
    first, _ = _run(client, "```python\nx = 41\n```", session_id="e2e-s1")
    second, events = _run(client, "```python\nprint(x + 1)\n```", session_id="e2e-s1")
    assert first["status"] == second["status"] == "succeeded"
    assert _tool_output(_messages(events)[2]).strip() == "42"
    memory = redis.Redis.from_url(f"{stack.redis_url}/0").lrange(
        "session:demo:e2e-s1:memory", 0, -1
    )
    contents = [AgentMessage.model_validate_json(m).content for m in memory]
    assert len(contents) == 8 and contents[0] == "```python\nx = 41\n```"


def test_other_session_shares_nothing(client: TaskyardClient) -> None:
    _run(client, "```python\ny_private = 7\n```", session_id="e2e-a")
    task, events = _run(client, "```python\nprint(y_private)\n```", session_id="e2e-b")
    assert "NameError" in _tool_output(_messages(events)[2])
    assert task["status"] == "succeeded"  # the model saw the error and answered


def test_output_no_store_can_encode_still_ends_the_task(client: TaskyardClient) -> None:
    # A lone surrogate printed in the sandbox used to break the tool worker's store step and
    # leave the task in waiting_tools for good.
    task = wait_status(client, client.submit('```python\nprint("\\ud800 ok")\n```')["id"])
    assert task["status"] == "succeeded"
    assert _tool_output(AgentMessage.model_validate(task["messages"][2])).strip() == "\ufffd ok"


def test_max_steps_ends_a_runaway_task(client: TaskyardClient) -> None:
    task, events = _run(client, DEMO_TASK, agent={"max_steps": 1})
    assert task["status"] == "failed"
    assert "max_steps (1)" in task["error"]
    assert events[-1].data == {"status": "failed", "error": task["error"]}


def test_concurrent_first_calls_of_new_sessions(client: TaskyardClient, stack: LocalStack) -> None:
    # A fresh tool worker, then several sessions' first tool calls at once: the worker's
    # sandbox provider and the sandboxes start concurrently, and no call is lost.
    _run(client, "```python\nprint(1)\n```", session_id="burst-warm")
    stack.kill("tool_worker")
    _wait_for_exited_sandboxes()  # the new worker's providers all race to remove these
    stack.restart("tool_worker")
    ids = [client.submit("```python\nprint(7 * 6)\n```", session_id=f"burst-{i}")["id"]
           for i in range(stack.tool_concurrency)]  # fmt: skip
    for task_id in ids:
        task = wait_status(client, task_id)
        assert task["status"] == "succeeded" and "42" in task["result"]
