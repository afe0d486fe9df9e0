"""Two tool workers on one Docker engine: a worker stopped on purpose (scale-in, a deploy: a
warm shutdown) hands its sessions' running interpreters to the other, which takes them over
on their next call; state and files survive, through the gateway, and nobody is told of a
loss. The stopped worker's restart leaves what it handed over. A worker killed costs its
sessions their state, said once, and the model may have their recorded cells run again."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from e2e_support import QUICK_RECOVERY, cell_output

from devstack.stack import LocalStack
from taskyard.client import TaskyardClient

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

LOST = "Note: state lost ("


@pytest.fixture(scope="module")
def stack(sandbox_image: str) -> Iterator[LocalStack]:
    stack = LocalStack(sandbox_backend="docker", tool_workers=2, extra_env=QUICK_RECOVERY).start()
    yield stack
    stack.stop()


def _holder(client: TaskyardClient, session: str) -> str:
    interpreter = client.session(session, limit=1)["interpreter"]
    assert interpreter["alive"], interpreter
    worker: str = interpreter["worker"]
    return worker


def _process(stack: LocalStack, node: str) -> str:
    return {n: name for name, n in stack.tool_worker_nodes().items()}[node.split("@")[0]]


def test_a_stopped_workers_session_goes_on_with_its_state_on_the_other(
    stack: LocalStack, client: TaskyardClient
) -> None:
    session = f"handoff-{uuid.uuid4().hex[:6]}"
    assert cell_output(client, "x = 41\nprint(x)", session).strip() == "41"
    node = _holder(client, session)
    name = _process(stack, node)
    stack.processes.stop(name)  # a warm shutdown, as scaling in with compose does
    try:
        after = cell_output(client, "print(x + 1)", session)
        assert after.strip() == "42" and LOST not in after
        assert _holder(client, session) not in (node, None)  # the other worker took it over
    finally:
        stack.restart(name)


def test_state_and_files_survive_and_the_stopped_workers_restart_leaves_them(
    stack: LocalStack, client: TaskyardClient
) -> None:
    sessions = [f"handoff-{uuid.uuid4().hex[:6]}-{n}" for n in range(6)]
    for n, session in enumerate(sessions):
        code = f"x = {n * 100}\nopen('mine.txt', 'w').write('{session}')\nprint(x)"
        assert cell_output(client, code, session).strip() == str(n * 100)
    holders = {session: _holder(client, session) for session in sessions}
    node = max(set(holders.values()), key=list(holders.values()).count)
    name = _process(stack, node)
    stack.processes.stop(name)
    stack.restart(name)  # its start removes what it left, but not what it handed over
    for n, session in enumerate(sessions):
        after = cell_output(client, "print(x + 1, open('mine.txt').read())", session)
        assert after.strip() == f"{n * 100 + 1} {session}", (session, holders[session], after)


def test_a_killed_workers_session_is_told_and_may_replay_its_cells(
    stack: LocalStack, client: TaskyardClient
) -> None:
    session = f"handoff-{uuid.uuid4().hex[:6]}"
    assert cell_output(client, "x = 40\nprint(x)", session).strip() == "40"
    assert cell_output(client, "x += 1\nprint(x)", session).strip() == "41"
    node = _holder(client, session)
    name = _process(stack, node)
    stack.kill(name)
    try:
        time.sleep(2.5)  # its heartbeat lapses: the next call goes to the other worker
        lost = cell_output(client, "print(globals().get('x'))", session)
        note, offer, output = lost.strip().split("\n")  # the offer under the note
        assert f"Note: state lost (its tool worker {node} stopped answering" in note
        assert "2 earlier cells that ran without an error are recorded" in offer
        assert output == "None"  # a fresh interpreter ran the cell
        replayed = cell_output(client, "%replay", session)
        assert replayed.startswith("Replayed the 2 cells recorded before"), replayed
        assert cell_output(client, "print(x + 1)", session).strip() == "42"
    finally:
        stack.restart(name)
