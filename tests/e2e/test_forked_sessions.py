"""Forking a session through the real stack (Docker sandboxes, the scripted model): the fork has
the source's memory and from then on each goes its own way. A session whose interpreter runs
is refused with the reason (no backend copies a running interpreter yet: docs/security.md),
and nothing is left behind by the refusal."""

from __future__ import annotations

import pytest
from e2e_support import tool_output, wait_status

from taskyard.client import NotFound, ServerError, TaskyardClient

pytestmark = pytest.mark.e2e


def _run(client: TaskyardClient, code: str, session: str) -> str:
    """Run `code` as the session's next cell (through a task); what it printed."""
    task = wait_status(client, client.submit(f"```python\n{code}\n```", session_id=session)["id"])
    assert task["status"] == "succeeded", task
    return tool_output(task).strip()


def test_a_session_without_a_running_interpreter_forks_its_memory(
    client: TaskyardClient,
) -> None:
    talk = {"system_prompt": "Count the messages.", "tools": []}  # no code: no interpreter
    task = client.submit("What is 2 + 2?", session_id="talk-a", agent=talk)
    task = wait_status(client, task["id"])
    assert task["status"] == "succeeded", task
    before = client.session("talk-a")["total_messages"]
    forked = client.fork_session("talk-a", "talk-b")
    assert forked == {"session_id": "talk-b", "forked_from": "talk-a", "interpreter": "none"}
    shown = client.session("talk-b")
    assert (shown["total_messages"], shown["forked_from"]) == (before, "talk-a")
    assert _run(client, "print(6 * 7)", "talk-b") == "42"  # its own interpreter, fresh
    assert client.session("talk-a")["total_messages"] == before


def test_a_running_interpreter_is_not_copied_and_the_refusal_says_why(
    client: TaskyardClient,
) -> None:
    _run(client, "x = 41\nprint('ok')", "live-a")
    with pytest.raises(ServerError) as refused:
        client.fork_session("live-a", "live-b")
    assert refused.value.status == 503
    assert "running interpreter" in str(refused.value)
    with pytest.raises(NotFound):
        client.session("live-b")
    assert _run(client, "print(x + 1)", "live-a") == "42"  # the source is untouched
