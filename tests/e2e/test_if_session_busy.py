"""A message that arrives while its session is busy, through the real stack, each policy with
a tool call in flight (a sandbox cell sleeping): `enqueue` waits its turn, `reject` is a 409
with its reason, `interrupt` cancels the running task and keeps its committed steps, and
`rollback` cancels it and removes its messages before the new task starts. The new task's
agent asks the scripted model to count the messages it is sent, so its answer says what its
prompt held."""

from __future__ import annotations

import pytest
from e2e_support import wait_status

from devstack.stack import LocalStack
from taskyard.client import ClientError, TaskyardClient

pytestmark = pytest.mark.e2e

# Its output, "woke up", is not in its code: only a result that came in would hold it.
SLEEPER = "```python\nimport time\ntime.sleep({s})\nprint('woke', 'up')\n```"
COUNTER = {"system_prompt": "Count the messages.", "tools": []}


def _in_flight(stack: LocalStack, client: TaskyardClient, session: str, sleep_s: int) -> str:
    """Submit a task whose cell sleeps; return its id once the tool call runs."""
    offset = len(stack.log_path("tool_worker").read_text(errors="replace"))
    task_id = client.submit(SLEEPER.format(s=sleep_s), session_id=session)["id"]
    stack.wait_log("tool_worker", "tool call IPythonInterpreter", after=offset)
    assert client.get(task_id)["status"] == "waiting_tools"
    return task_id


def _order(stream_id: str) -> tuple[int, int]:
    millis, seq = stream_id.split("-")
    return int(millis), int(seq)


def _memory(client: TaskyardClient, session: str) -> list[dict]:
    return client.http.get(f"/v1/sessions/{session}?limit=500").json()["messages"]


def _then_code_runs(client: TaskyardClient, session: str) -> None:
    """The session's interpreter is free: the displaced task's cell was stopped (had it slept
    on, this would wait ten minutes)."""
    done = wait_status(
        client, client.submit("```python\nprint('next')\n```", session_id=session)["id"]
    )
    assert done["status"] == "succeeded" and "next" in done["result"]


def test_enqueue_waits_for_the_running_task_and_sees_all_of_it(
    stack: LocalStack, client: TaskyardClient
) -> None:
    first = _in_flight(stack, client, "b-enqueue", 5)
    second = client.submit("and now?", session_id="b-enqueue", agent=COUNTER,
                           if_session_busy="enqueue")["id"]  # fmt: skip
    assert wait_status(client, first)["status"] == "succeeded"  # not displaced
    done = wait_status(client, second)
    # It ran after the first ended: it saw the first's user message, tool call, tool result
    # and answer, then its own.
    assert done["status"] == "succeeded" and done["result"].startswith("[5 messages]")
    assert "woke up" in str(_memory(client, "b-enqueue")[2]["content"])
    # Queued while the first ran: its stream says `queued` before the first's end, `running`
    # after it (stream ids are the one Redis server's clock).
    ended = list(client.events(first))[-1].id
    said = {e.data["status"]: e.id for e in client.events(second) if e.kind.value == "status"}
    assert _order(said["queued"]) < _order(ended) < _order(said["running"])


def test_reject_is_a_409_with_its_reason_and_the_running_task_goes_on(
    stack: LocalStack, client: TaskyardClient
) -> None:
    first = _in_flight(stack, client, "b-reject", 600)
    with pytest.raises(ClientError) as refused:
        client.submit("and now?", session_id="b-reject", if_session_busy="reject")
    assert refused.value.status == 409
    assert (
        str(refused.value) == f"session b-reject is running task {first} (if_session_busy=reject)"
    )
    assert client.get(first)["status"] == "waiting_tools"  # its cell still runs
    tasks = client.http.get("/v1/sessions/b-reject").json()["tasks"]
    assert tasks == [first]  # the refused message made no task
    client.http.post(f"/v1/tasks/{first}/cancel").raise_for_status()


def test_interrupt_cancels_the_running_task_keeping_its_committed_steps(
    stack: LocalStack, client: TaskyardClient
) -> None:
    first = _in_flight(stack, client, "b-interrupt", 600)
    # The agent's default, here: the request names no policy.
    second = client.submit("and now?", session_id="b-interrupt",
                           agent={**COUNTER, "if_session_busy": "interrupt"})["id"]  # fmt: skip
    ended = wait_status(client, first, {"cancelled"})
    assert ended["error"] == f"interrupted by task {second}"
    done = wait_status(client, second)
    # The first task's message and its tool call stay (committed); no result came in.
    assert done["status"] == "succeeded" and done["result"].startswith("[3 messages]")
    memory = _memory(client, "b-interrupt")
    assert [m["sender"] for m in memory] == ["user", "assistant", "user", "assistant"]
    assert memory[0]["content"] == SLEEPER.format(s=600)
    _then_code_runs(client, "b-interrupt")
    # Only the next task's four messages came after: the stopped call's result never did.
    after = _memory(client, "b-interrupt")
    assert after[:4] == memory and len(after) == 8
    assert not any("woke up" in str(m["content"]) for m in after)


def test_rollback_removes_the_running_tasks_messages_before_the_new_one_starts(
    stack: LocalStack, client: TaskyardClient
) -> None:
    before = wait_status(
        client, client.submit("hello", session_id="b-rollback", agent=COUNTER)["id"]
    )
    assert before["status"] == "succeeded"
    kept = _memory(client, "b-rollback")
    assert len(kept) == 2
    first = _in_flight(stack, client, "b-rollback", 600)
    assert len(_memory(client, "b-rollback")) == 4  # its message and tool call, committed
    # A task waiting its turn meanwhile keeps it: nothing accepted is lost.
    waiting = client.submit("still here?", session_id="b-rollback", agent=COUNTER)["id"]
    second = client.submit("and now?", session_id="b-rollback", agent=COUNTER,
                           if_session_busy="rollback")["id"]  # fmt: skip
    ended = wait_status(client, first, {"cancelled"})
    assert ended["error"] == f"rolled back for task {second}"
    done = wait_status(client, second)
    # What came before the rolled-back task, and its own message: nothing of the first.
    assert done["status"] == "succeeded" and done["result"].startswith("[3 messages]")
    after_waiting = wait_status(client, waiting)  # its turn came after the new task's
    assert after_waiting["result"].startswith("[5 messages]")
    memory = _memory(client, "b-rollback")
    assert memory[:2] == kept
    assert [m["content"] for m in memory[2::2]] == ["and now?", "still here?"]
    _then_code_runs(client, "b-rollback")
    # The stopped cell's result never reached the session, nor anything else of the first.
    after = _memory(client, "b-rollback")
    assert after[:6] == memory and len(after) == 10
    contents = [str(m["content"]) for m in after]
    assert not any("woke up" in c or "time.sleep" in c for c in contents)
