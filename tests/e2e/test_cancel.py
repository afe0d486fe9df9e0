"""Cancelling through the real stack: it reaches the running cell, nothing of the cancelled
task is published after its final event, and a session's queue goes on past a cancelled
task that was waiting its turn."""

from __future__ import annotations

import time

import pytest
from e2e_support import wait_status

from devstack.stack import LocalStack
from taskyard.client import TaskyardClient

pytestmark = pytest.mark.e2e

FOREVER = "```python\nimport time\ntime.sleep(600)\nprint('woke up')\n```"


def _cancel(client: TaskyardClient, task_id: str) -> None:
    client.http.post(f"/v1/tasks/{task_id}/cancel").raise_for_status()


def test_a_cancel_stops_the_running_cell_and_the_session_goes_on(
    stack: LocalStack, client: TaskyardClient
) -> None:
    offset = len(stack.log_path("tool_worker").read_text(errors="replace"))
    sleeper = client.submit(FOREVER, session_id="c-cell")["id"]
    after = client.submit("```python\nprint('next')\n```", session_id="c-cell")["id"]
    stack.wait_log("tool_worker", "tool call IPythonInterpreter", after=offset)
    _cancel(client, sleeper)
    # Had the cell run on, the next task would wait ten minutes for the interpreter.
    done = wait_status(client, after, timeout=60)
    assert done["status"] == "succeeded" and "next" in done["result"]
    events = list(client.events(sleeper))
    assert events[-1].is_final and events[-1].data["status"] == "cancelled"
    senders = [e.data["sender"] for e in events if e.kind.value == "message"]
    assert senders == ["user", "assistant"]  # no tool result after (or before) the end


def test_cancelling_a_task_waiting_its_turn_does_not_block_the_session(
    client: TaskyardClient,
) -> None:
    first = client.submit("```python\nimport time\ntime.sleep(2)\n```", session_id="c-q")["id"]
    waiting = client.submit("```python\nprint(2)\n```", session_id="c-q")["id"]
    last = client.submit("```python\nprint(3)\n```", session_id="c-q")["id"]
    _cancel(client, waiting)
    assert wait_status(client, first)["status"] == "succeeded"
    assert wait_status(client, last)["status"] == "succeeded"  # not stuck behind `waiting`
    assert client.get(waiting)["status"] == "cancelled"


@pytest.mark.parametrize("delay_s", [0.0, 0.03, 0.1])
def test_a_cancel_as_the_tool_call_starts_still_stops_its_cell(
    client: TaskyardClient, delay_s: float
) -> None:
    """A cancel racing the call: its job still queued, claimed but its cell not yet under
    way, or just started. Each way the cell is stopped, and the session's next task runs."""
    session = f"c-race-{delay_s}"
    sleeper = client.submit(FOREVER, session_id=session)["id"]
    while client.get(sleeper)["status"] == "queued":
        time.sleep(0.002)
    time.sleep(delay_s)
    _cancel(client, sleeper)
    after = client.submit("```python\nprint('next')\n```", session_id=session)["id"]
    done = wait_status(client, after, timeout=60)
    assert done["status"] == "succeeded" and "next" in done["result"], done
    assert client.get(sleeper)["status"] == "cancelled"
