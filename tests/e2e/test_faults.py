"""Accepted tasks survive faults: a crashed agent or tool worker, a lost model upstream, a
dead kernel. Every service is a real process; faults are real SIGKILLs."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator

import docker
import pytest
import redis
from e2e_support import configure_model, wait_status

from devstack.cli import DEMO_TASK
from devstack.stack import LocalStack
from taskyard.agentkit.schema import ActionReturn, AgentMessage
from taskyard.client import TaskyardClient

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(sandbox_image: str) -> Iterator[LocalStack]:
    # A short visibility timeout, so a dead worker's job comes back within the test.
    # And a quick sweep: a task standing still for 2 s has what it waits on sent again.
    env = {"TASKYARD_VISIBILITY_TIMEOUT_S": "3", "TASKYARD_PROXY_PROBE_INTERVAL_S": "0.3",
           "TASKYARD_STALL_S": "2", "TASKYARD_SWEEP_INTERVAL_S": "0.5"}  # fmt: skip
    stack = LocalStack(sandbox_backend="docker", extra_env=env).start()
    yield stack
    stack.stop()


def test_crashed_agent_worker_loses_no_task(stack: LocalStack, client: TaskyardClient) -> None:
    configure_model(stack, latency_ms=3000)  # the step is mid-call when the worker dies
    try:
        task_id = client.submit(DEMO_TASK)["id"]
        wait_status(client, task_id, {"running"})
        stack.kill("agent_worker")
    finally:
        configure_model(stack, latency_ms=0)
    stack.restart("agent_worker")
    task = wait_status(client, task_id)
    assert task["status"] == "succeeded"
    assert "1.414213562373" in task["result"]
    assert len(task["messages"]) == 4  # the redelivered step applied once


def test_crashed_tool_worker_loses_no_task(stack: LocalStack, client: TaskyardClient) -> None:
    log_offset = len(stack.log_path("tool_worker").read_text(errors="replace"))
    task_id = client.submit("```python\nimport time\ntime.sleep(2)\nprint('slept')\n```")["id"]
    stack.wait_log("tool_worker", "tool call IPythonInterpreter", after=log_offset)  # mid-call
    stack.kill("tool_worker")
    stack.restart("tool_worker")
    task = wait_status(client, task_id)
    assert task["status"] == "succeeded"
    assert "slept" in task["result"]


def test_lost_model_upstream_loses_no_task(stack: LocalStack, client: TaskyardClient) -> None:
    stack.kill("model")
    try:
        task_id = client.submit(DEMO_TASK)["id"]
        time.sleep(2)  # the step meets a dead upstream and backs off
        assert client.get(task_id)["status"] in {"queued", "running"}
    finally:
        stack.restart("model")
    task = wait_status(client, task_id)
    assert task["status"] == "succeeded"


def test_dead_kernel_is_reported_and_the_task_goes_on(client: TaskyardClient) -> None:
    task_id = client.submit("```python\nimport os\nos._exit(1)\n```", session_id="kernel")["id"]
    task = wait_status(client, task_id)
    tool = AgentMessage.model_validate(task["messages"][2])
    assert isinstance(tool.content, ActionReturn)
    assert "state" in (tool.content.errmsg or "").lower()
    assert task["status"] == "succeeded"  # the model saw the error and answered
    again = client.submit("```python\nprint('alive')\n```", session_id="kernel")["id"]
    assert "alive" in wait_status(client, again)["result"]


def test_tool_that_cannot_run_is_reported_to_the_model(sandbox_image: str) -> None:
    # The worker checks its sandbox at start, so the image is there then and gone by the call.
    doomed = f"taskyard/sandbox:doomed-{uuid.uuid4().hex[:8]}"
    engine = docker.from_env()
    engine.images.get(sandbox_image).tag(doomed)
    env = {"TASKYARD_SANDBOX_IMAGE": doomed, "TASKYARD_SANDBOX_WARM_POOL": "0"}
    try:
        stack = LocalStack(sandbox_backend="docker", extra_env=env).start()
    finally:
        engine.images.remove(doomed)  # only the tag: the image keeps its others
        engine.close()
    try:
        client = TaskyardClient(stack.gateway_url, stack.api_key)
        task_id = client.submit(DEMO_TASK)["id"]
        task = wait_status(client, task_id)
    finally:
        stack.stop()
    tool = AgentMessage.model_validate(task["messages"][2])
    assert isinstance(tool.content, ActionReturn)
    assert doomed in (tool.content.errmsg or "")
    assert task["status"] == "succeeded"  # the model was told, and answered


def _drop_job(stack: LocalStack, queue: str, task_id: str) -> None:
    """Take the task's job off the broker, as kombu's pop-before-unacked gap can lose it."""
    broker = redis.Redis.from_url(f"{stack.redis_url}/0")  # the broker shares the store's
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for raw in broker.lrange(queue, 0, -1):
            if task_id.encode() in base64.b64decode(json.loads(raw)["body"]):
                assert broker.lrem(queue, 1, raw) == 1
                return
        time.sleep(0.05)
    raise AssertionError(f"no job of {task_id} on {queue}")


@pytest.mark.parametrize(
    ("worker", "queue"),
    [("agent_worker", "agent"), ("tool_worker", "tools.IPythonInterpreter")],
    ids=["step job", "tool job"],
)
def test_a_lost_job_is_sent_again_by_the_sweep(
    stack: LocalStack, client: TaskyardClient, worker: str, queue: str
) -> None:
    stack.kill(worker)
    try:
        task_id = client.submit(DEMO_TASK)["id"]
        _drop_job(stack, queue, task_id)
    finally:
        stack.restart(worker)
    task = wait_status(client, task_id)
    assert task["status"] == "succeeded" and "1.414213562373" in task["result"]


def test_a_redis_restart_during_a_tool_call_loses_nothing(
    stack: LocalStack, client: TaskyardClient
) -> None:
    offset = len(stack.log_path("tool_worker").read_text(errors="replace"))
    code = "```python\nimport time\ntime.sleep(2)\nprint('after the restart')\n```"
    task_id = client.submit(code, session_id="redis-restart")["id"]
    stack.wait_log("tool_worker", "tool call IPythonInterpreter", after=offset)
    redis.Redis.from_url(stack.redis_url).shutdown()  # saves its AOF, then exits
    stack.procs.pop("redis").wait(timeout_s=30)
    time.sleep(1)  # the tool call ends while Redis is down
    stack.restart("redis")
    task = wait_status(client, task_id, timeout=120)
    assert task["status"] == "succeeded" and "after the restart" in task["result"]
