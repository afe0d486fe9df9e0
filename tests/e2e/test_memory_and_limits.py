"""Long sessions and limits through the real stack: a session driven past a small context
window is compacted (the prompt stays under the window, the full history stays readable, the
task still answers); a token budget and a deadline end tasks with their reasons, the deadline
(the deployment's, or the task's own) by the sweep while a tool never comes back."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from e2e_support import wait_status

from devstack.stack import LocalStack
from taskyard.client import TaskyardClient

pytestmark = pytest.mark.e2e

WINDOW = 700  # tokens: a few turns of this session, tools included


@pytest.fixture(scope="module")
def stack(sandbox_image: str) -> Iterator[LocalStack]:
    env = {"TASKYARD_TASK_DEADLINE_S": "5", "TASKYARD_SWEEP_INTERVAL_S": "0.5"}
    stack = LocalStack(sandbox_backend="docker", extra_env=env).start()
    yield stack
    stack.stop()


def _scripted_stats(stack: LocalStack) -> dict:
    return httpx.get(f"http://127.0.0.1:{stack.ports.model}/scripted/stats", timeout=5).json()


def test_a_session_past_its_window_is_compacted_and_still_answers(
    stack: LocalStack, client: TaskyardClient
) -> None:
    agent = {"context_window": WINDOW}
    compactions = 0
    for i in range(10):
        code = f"```python\nprint('{i}' * 150)\n```"
        task_id = client.submit(code, session_id="long-talk", agent=agent)["id"]
        task = wait_status(client, task_id)
        assert task["status"] == "succeeded" and str(i) * 150 in task["result"]
        compactions += sum(e.kind.value == "memory_compacted" for e in client.events(task_id))
    assert compactions >= 1
    # What the model was sent stayed under the window (the scripted model counts characters;
    # a token is about 4 of them).
    assert _scripted_stats(stack)["max_prompt_chars"] / 4 < WINDOW
    session = client.http.get("/v1/sessions/long-talk?limit=500").json()
    assert session["total_messages"] == 40  # every message kept, only the model's view shrank
    assert session["messages"][0]["content"].startswith("```python\nprint('0'")


def test_a_token_budget_ends_the_task_with_its_reason(client: TaskyardClient) -> None:
    task = wait_status(client, client.submit("hello", agent={"max_tokens_total": 10})["id"])
    assert task["status"] == "failed"
    assert task["error"].startswith("token budget of 10 would be passed")


def test_a_task_whose_tool_never_comes_back_times_out_at_its_deadline(
    stack: LocalStack, client: TaskyardClient
) -> None:
    stack.kill("tool_worker")  # no worker takes the tool's job
    try:
        task_id = client.submit("```python\nprint(1)\n```")["id"]
        wait_status(client, task_id, {"waiting_tools"})
        task = wait_status(client, task_id, {"timed_out"}, timeout=30)
    finally:
        stack.restart("tool_worker")
    assert task["error"] == "deadline of 5s passed"


def test_a_task_times_out_at_its_own_deadline(stack: LocalStack, client: TaskyardClient) -> None:
    stack.kill("tool_worker")
    try:
        task_id = client.submit("```python\nprint(2)\n```", agent={"deadline_s": 2})["id"]
        assert client.get(task_id)["deadline_s"] == 2
        task = wait_status(client, task_id, {"timed_out"}, timeout=30)
    finally:
        stack.restart("tool_worker")
    assert task["error"] == "deadline of 2s passed"
    # Ended by its own deadline, before the stack's (5 s): the sweep runs every 0.5 s.
    assert task["updated_at"] - task["created_at"] < 4
