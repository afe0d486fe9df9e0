"""Sessions through the real stack: their view shows the live interpreter, deleting one stops
its interpreter and forgets its memory, and the task list pages through what ran."""

from __future__ import annotations

import pytest
from e2e_support import wait_status

from taskyard.client import TaskyardClient

pytestmark = pytest.mark.e2e


def _run(client: TaskyardClient, code: str, session: str) -> dict:
    task = wait_status(client, client.submit(f"```python\n{code}\n```", session_id=session)["id"])
    assert task["status"] == "succeeded", task
    return task


def test_deleting_a_session_stops_its_interpreter_and_forgets_it(client: TaskyardClient) -> None:
    first = _run(client, "x = 41", "forget-me")
    view = client.http.get("/v1/sessions/forget-me").json()
    assert view["interpreter"]["alive"] is True
    assert view["total_messages"] == 4 and view["tasks"] == [first["id"]]
    assert client.http.delete("/v1/sessions/forget-me").status_code == 204
    assert client.http.get("/v1/sessions/forget-me").status_code == 404
    again = _run(client, "print(x + 1)", "forget-me")
    assert "NameError" in again["result"]  # a fresh interpreter: x is gone
    view = client.http.get("/v1/sessions/forget-me").json()
    assert view["total_messages"] == 4  # only the new task's messages
    assert view["tasks"] == [again["id"]]  # the first stays a task, no longer the session's
    assert client.get(first["id"])["status"] == "succeeded"


def test_the_task_list_pages_through_a_sessions_tasks(client: TaskyardClient) -> None:
    ids = [_run(client, f"print({i})", "listed")["id"] for i in range(3)]
    page = client.http.get("/v1/tasks?session_id=listed&limit=2").json()
    assert [t["id"] for t in page["tasks"]] == ids[:0:-1]
    assert all(t["status"] == "succeeded" for t in page["tasks"])
    rest = client.http.get(f"/v1/tasks?session_id=listed&limit=2&cursor={page['next_cursor']}")
    assert [t["id"] for t in rest.json()["tasks"]] == ids[:1]
    assert rest.json()["next_cursor"] is None
