"""Human approval through the real stack: a held call waits (holding no worker, surviving a
killed agent worker) until a person approves it, edits it or denies it; the model reads a
denial; deciding twice, an unknown call or another tenant's task get the right errors; a
call nobody decides on in time is denied; the CLI asks when following, and Ctrl-C leaves the
held call waiting for a decision."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
from e2e_support import wait_status

from devstack.stack import LocalStack
from taskyard.client import TaskyardClient

pytestmark = pytest.mark.e2e

GATED = {"approval": {"tools": ["IPythonInterpreter"]}}
CODE = "```python\nprint(6 * 7)\n```"


@pytest.fixture(scope="module")
def stack(sandbox_image: str) -> Iterator[LocalStack]:
    env = {"TASKYARD_SWEEP_INTERVAL_S": "0.5"}  # approval timeouts are found quickly
    stack = LocalStack(sandbox_backend="docker", extra_env=env,
                       api_keys="dev-key=demo,other-key=other").start()  # fmt: skip
    yield stack
    stack.stop()


def _held(client: TaskyardClient, agent: dict = GATED, session: str | None = None) -> tuple:
    task_id = client.submit(CODE, agent=agent, session_id=session)["id"]
    task = wait_status(client, task_id, {"waiting_approval"})
    [held] = task["approvals"]
    assert held["state"] == "pending" and held["tool"] == "IPythonInterpreter"
    return task_id, held["call_id"]


def test_an_approved_call_runs_and_the_task_answers(client: TaskyardClient) -> None:
    task_id, call_id = _held(client)
    asked = next(e for e in client.events(task_id) if e.kind.value == "approval_requested")
    assert asked.data["calls"][0]["id"] == call_id
    assert client.approve(task_id, call_id)["state"] == "approved"
    task = wait_status(client, task_id)
    assert task["status"] == "succeeded" and "42" in task["result"]
    again = client.http.post(f"/v1/tasks/{task_id}/approvals/{call_id}",
                             json={"decision": "approve"})  # fmt: skip
    assert again.status_code == 409  # decided before, though its step is over now


def test_edited_arguments_are_what_runs(client: TaskyardClient) -> None:
    task_id, call_id = _held(client)
    client.approve(task_id, call_id, {"command": "print('edited')"})
    assert "edited" in wait_status(client, task_id)["result"]


def test_a_denial_reaches_the_model_with_its_reason(client: TaskyardClient) -> None:
    task_id, call_id = _held(client)
    assert client.deny(task_id, call_id, "not on a Friday")["state"] == "denied"
    task = wait_status(client, task_id)
    assert task["status"] == "succeeded" and "not on a Friday" in task["result"]


def test_decisions_twice_unknown_and_foreign_are_refused(
    stack: LocalStack, client: TaskyardClient
) -> None:
    task_id, call_id = _held(client)
    other = httpx.Client(base_url=stack.gateway_url,
                         headers={"Authorization": "Bearer other-key"})  # fmt: skip
    url = f"/v1/tasks/{task_id}/approvals/{call_id}"
    assert other.post(url, json={"decision": "approve"}).status_code == 404
    assert client.http.post(f"/v1/tasks/{task_id}/approvals/nope",
                            json={"decision": "approve"}).status_code == 404  # fmt: skip
    assert client.http.post(url, json={"decision": "deny"}).status_code == 200
    assert client.http.post(url, json={"decision": "approve"}).status_code == 409
    assert client.http.post(url, json={"decision": "maybe"}).status_code == 422
    wait_status(client, task_id)


def test_waiting_survives_a_killed_agent_worker(stack: LocalStack, client: TaskyardClient) -> None:
    task_id, call_id = _held(client)
    stack.kill("agent_worker")  # nothing is held by a worker while a task waits
    stack.restart("agent_worker")
    client.approve(task_id, call_id)
    assert wait_status(client, task_id)["status"] == "succeeded"


def test_an_undecided_call_is_denied_at_its_timeout(client: TaskyardClient) -> None:
    timed = {"approval": {"tools": "*", "timeout_s": 1}}
    task_id, _ = _held(client, timed)
    task = wait_status(client, task_id, timeout=30)
    assert task["status"] == "succeeded" and "no decision within 1 s" in task["result"]


def test_the_cli_asks_when_following(stack: LocalStack) -> None:
    argv = [sys.executable, "-m", "taskyard.client.cli", "--gateway", stack.gateway_url,
            "--api-key", stack.api_key, "submit", CODE, "--ask",
            "--agent", '{"approval": {"tools": ["IPythonInterpreter"]}}']  # fmt: skip
    done = subprocess.run(argv, input="e\n{\"command\": \"print(123)\"}\n", text=True,
                          capture_output=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[y/N/e(dit)]" in done.stdout
    assert "approval needed: IPythonInterpreter" in done.stdout
    assert "123" in done.stdout.splitlines()[-2] + done.stdout.splitlines()[-1]


def test_ctrl_c_while_following_leaves_the_call_waiting(
    stack: LocalStack, client: TaskyardClient
) -> None:
    argv = [sys.executable, "-m", "taskyard.client.cli", "--gateway", stack.gateway_url,
            "--api-key", stack.api_key, "submit", CODE, "--no-ask",
            "--agent", '{"approval": {"tools": ["IPythonInterpreter"]}}']  # fmt: skip
    cli = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert cli.stdout is not None
    task_id = cli.stdout.readline().split()[1]  # "task <id> (session <id>)"
    for line in cli.stdout:  # the test's timeout bounds the wait
        if line.startswith("[approval needed: IPythonInterpreter"):
            break
    cli.send_signal(signal.SIGINT)
    _, err = cli.communicate(timeout=30)
    assert cli.returncode == 130
    assert err == (
        f"taskyard: stopped following; task {task_id} goes on running on the server: "
        f"`taskyard follow {task_id}` to reattach, `taskyard cancel {task_id}` to cancel it\n"
    )
    [held] = wait_status(client, task_id, {"waiting_approval"})["approvals"]
    client.approve(task_id, held["call_id"])  # the task went on without the CLI
    task = wait_status(client, task_id)
    assert task["status"] == "succeeded" and "42" in task["result"]
