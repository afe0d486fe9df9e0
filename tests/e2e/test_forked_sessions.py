"""Forking a session through the real stack (Docker sandboxes, the scripted model): the fork has
the source's memory and, when its interpreter runs, a copy of that interpreter as it is now
(names, working directory), and from then on each goes its own way. A source a task runs in is
refused, and nothing is left behind by the refusal."""

from __future__ import annotations

import pytest
from e2e_support import tool_output, wait_status

from taskyard.client import InvalidRequest, NotFound, TaskyardClient

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
    assert forked == {
        "session_id": "talk-b", "forked_from": "talk-a", "interpreter": "none", "skipped": {},
    }  # fmt: skip
    shown = client.session("talk-b")
    assert (shown["total_messages"], shown["forked_from"]) == (before, "talk-a")
    assert _run(client, "print(6 * 7)", "talk-b") == "42"  # its own interpreter, fresh
    assert client.session("talk-a")["total_messages"] == before


def test_a_running_interpreter_is_copied_and_each_goes_its_own_way(
    client: TaskyardClient,
) -> None:
    setup = (
        "import math, socket\n"
        "x = 41\n"
        "def next_x():\n"
        "    return x + 1\n"
        "open('notes.txt', 'w').write('from a')\n"
        "sock = socket.socket()\n"
        "print('ok')"
    )
    _run(client, setup, "live-a")
    forked = client.fork_session("live-a", "live-b")
    assert (forked["interpreter"], forked["forked_from"]) == ("copied", "live-a")
    assert list(forked["skipped"]) == ["sock"]  # a socket cannot be copied: named, not fatal
    check = "print(next_x(), open('notes.txt').read(), math.isqrt(16), sorted(__fork_skipped__))"
    assert _run(client, check, "live-b") == "42 from a 4 ['sock']"
    _run(client, "x = 0\nopen('notes.txt', 'w').write('from b')\nprint('ok')", "live-b")
    assert _run(client, "print(next_x(), open('notes.txt').read())", "live-a") == "42 from a"
    _run(client, "x = 100\nopen('only-a.txt', 'w').write('a')\nprint('ok')", "live-a")
    assert _run(client, "import os\nprint(x, os.path.exists('only-a.txt'))", "live-b") == "0 False"


def test_a_source_a_task_runs_in_is_refused_and_nothing_is_left(client: TaskyardClient) -> None:
    _run(client, "import time\nprint('ok')", "busy-a")
    running = client.submit("```python\ntime.sleep(3)\nprint('slept')\n```", session_id="busy-a")
    with pytest.raises(InvalidRequest) as refused:
        client.fork_session("busy-a", "busy-b")
    assert refused.value.status == 409
    with pytest.raises(NotFound):
        client.session("busy-b")
    assert wait_status(client, running["id"])["status"] == "succeeded"
