"""Three tool workers on the same queues, started as `docker compose up --scale tool_worker=3`
starts them (identical commands but for their node names): every cell of a session reaches the
interpreter that holds its state; a worker SIGKILLed mid-run costs exactly its own sessions
their state, each told once and why; a worker stopped on purpose hands its interpreters to the
others, and its sessions keep their state."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from e2e_support import QUICK_RECOVERY
from scale_support import (
    LOST,
    cell,
    has_state,
    holder,
    kept,
    number,
    task_output,
    values,
    worker_process,
)

from devstack.stack import LocalStack
from taskyard.client import TaskyardClient

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

CELLS = 5


@pytest.fixture(scope="module")
def stack(sandbox_image: str) -> Iterator[LocalStack]:
    env = {
        **QUICK_RECOVERY,
        # Room for every session's interpreter on whichever worker takes it (no evictions).
        "TASKYARD_SANDBOX_MAX_PER_TENANT": "64", "TASKYARD_SANDBOX_MAX_PER_WORKER": "64",
        "TASKYARD_SANDBOX_WARM_POOL": "2",
    }  # fmt: skip
    stack = LocalStack(sandbox_backend="docker", tool_workers=3, extra_env=env).start()
    yield stack
    stack.stop()


def _names(count: int) -> list[str]:
    tag = uuid.uuid4().hex[:6]
    return [f"scale-{tag}-{n}" for n in range(1, count + 1)]


def _sessions(
    client: TaskyardClient,
    names: list[str],
    after_cell: Callable[[int, dict[str, int]], None] = lambda *_: None,
) -> dict[str, list[str]]:
    """The sessions side by side, each running CELLS dependent cells one task after the
    other; `after_cell(n, cells)` is called as the n-th cell of all ends, with how many cells
    each session has run. Outputs by session."""
    done, cells, lock = [0], dict.fromkeys(names, 0), threading.Lock()

    def run(session: str) -> tuple[str, list[str]]:
        outputs = []
        for index in range(CELLS):
            task_id = client.submit(cell(number(session), index), session_id=session)["id"]
            outputs.append(task_output(client, task_id))
            with lock:
                done[0] += 1
                cells[session] += 1
                after_cell(done[0], dict(cells))
        return session, outputs

    with ThreadPoolExecutor(max_workers=min(len(names), 24)) as pool:
        return dict(pool.map(run, names))


def test_sixty_sessions_keep_their_state_across_three_workers(
    stack: LocalStack, client: TaskyardClient
) -> None:
    outputs = _sessions(client, _names(60))
    wrong = {
        session: out
        for session, out in outputs.items()
        if not kept(out, session, CELLS) or any(LOST in o for o in out)
    }
    assert wrong == {}
    holders = Counter(holder(client, session) for session in outputs)
    assert len(holders) == 3 and None not in holders, holders  # spread over the pool


def test_a_killed_worker_costs_its_own_sessions_their_state_once(
    stack: LocalStack, client: TaskyardClient
) -> None:
    names = _names(24)
    # The killed worker's sessions by the cells they had left then (one whose last cell was
    # under way may have finished it before the kill), and those with state to lose.
    victims: dict[str, int] = {}
    stateful: set[str] = set()
    killed: list[str] = []

    def kill_mid_run(cells_done: int, cells: dict[str, int]) -> None:
        if cells_done != len(names) * 2:  # most sessions have state; cells are in flight
            return
        held = {session: holder(client, session) for session in names}
        node = Counter(n for n in held.values() if n).most_common(1)[0][0]
        mine = [s for s, n in held.items() if n == node]
        stateful.update(s for s in mine if has_state(client, s))
        stack.kill(worker_process(stack, node))
        killed.append(node)
        victims.update({s: CELLS - cells[s] for s in mine})

    outputs = _sessions(client, names, kill_mid_run)
    assert killed, "the kill never happened"
    node = killed[0]
    try:
        notes = {session: sum(LOST in o for o in out) for session, out in outputs.items()}
        # The killed worker's sessions with state and cells to run after the kill are told,
        # once, why. (One whose first call had not finished there lost nothing.)
        told = {s: outputs[s] for s, left in victims.items() if left >= 2 and s in stateful}
        assert told and {s: notes[s] for s in told} == dict.fromkeys(told, 1), told
        assert all(notes[s] <= 1 for s in victims), {s: outputs[s] for s in victims}
        for out in told.values():
            said = next(o for o in out if LOST in o)
            assert f"its tool worker {node} stopped answering" in said
        # Every other session keeps its state, and is told nothing.
        others = [s for s in names if s not in victims]
        assert {s: outputs[s] for s in others if not kept(outputs[s], s, CELLS) or notes[s]} == {}
    finally:
        stack.restart(worker_process(stack, node))


def test_a_worker_stopped_on_purpose_hands_its_sessions_over(
    stack: LocalStack, client: TaskyardClient
) -> None:
    names = _names(9)
    for session in names:
        task_output(client, client.submit(cell(number(session), 0), session_id=session)["id"])
    held = {session: holder(client, session) for session in names}
    node = Counter(n for n in held.values() if n).most_common(1)[0][0]
    name = worker_process(stack, node)
    stack.processes.stop(name)  # a warm shutdown, as scaling in with compose does
    try:
        after = {
            s: task_output(client, client.submit(cell(0, 1), session_id=s)["id"]) for s in names
        }
        assert {s: out for s, out in after.items() if LOST in out} == {}
        assert {s: values([after[s]]) for s in names} == {s: [number(s) + 1] for s in names}
        moved = {s: holder(client, s) for s, n in held.items() if n == node}
        assert moved and node not in moved.values() and None not in moved.values()
    finally:
        stack.restart(name)
