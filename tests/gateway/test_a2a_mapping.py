"""A task's events in A2A's terms (`services.gateway.resources.a2a.mapping.TaskView`): one
fold for the stream, a subscription's snapshot and GetTask, so a task read whole equals the same
task folded in two halves; states as A2A names them; the transcript, notes, artifacts."""

from __future__ import annotations

from typing import Any

from a2a.types import (
    Message,
    Role,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
)

from services.gateway.resources.a2a.mapping import ANSWER, TaskView, Update
from taskyard.agentkit.schema import ActionReturn, AgentMessage, ToolCall
from taskyard.runtime.events import Event, EventKind

BASE = "http://gateway.test/"
CALL = ToolCall(id="call-1", name="IPythonInterpreter", parameters={"command": "print(6 * 7)"})


def _event(number: int, kind: EventKind, data: dict[str, Any]) -> Event:
    return Event(id=f"{1_700_000_000_000 + number}-0", kind=kind, data=data)


def _said(message: AgentMessage) -> dict[str, Any]:
    return message.model_dump(mode="json")


ASKED = AgentMessage(sender="user", content="What is 6 * 7?")
CALLS = AgentMessage(sender="assistant", content="", formatted={"tool_calls": [CALL.model_dump()]})
RESULT = AgentMessage.tool_result(CALL, ActionReturn(result=[{"type": "text", "content": "42"}]))
REPLY = AgentMessage(sender="assistant", content="It is 42.")
HELD = {"step": 0, "calls": [{"id": "call-1", "tool": "IPythonInterpreter"}]}
PLOT = {"name": "plot.png", "mime": "image/png", "kind": "image", "size": 10,
        "url": "/v1/tasks/t/artifacts/plot.png", "call_id": "call-1", "step": 0}  # fmt: skip
EVENTS = [
    _event(0, EventKind.STATUS, {"status": "queued"}),
    _event(1, EventKind.MESSAGE, _said(ASKED)),
    _event(2, EventKind.STATUS, {"status": "running"}),
    _event(3, EventKind.TOKEN, {"delta": "I will", "sender": "assistant"}),
    _event(4, EventKind.MESSAGE, _said(CALLS)),
    _event(5, EventKind.APPROVAL_REQUESTED, HELD),
    _event(6, EventKind.STATUS, {"status": "waiting_approval"}),
    _event(7, EventKind.APPROVAL_DECIDED, {"call_id": "call-1", "state": "approved"}),
    _event(8, EventKind.STATUS, {"status": "waiting_tools"}),
    _event(9, EventKind.ARTIFACT, PLOT),
    _event(10, EventKind.MESSAGE, _said(RESULT)),
    _event(11, EventKind.STATUS, {"status": "running"}),
    _event(12, EventKind.MESSAGE, _said(REPLY)),
    _event(13, EventKind.STATUS, {"status": "succeeded", "result": "It is 42."}),
]


def _fold(events: list[Event]) -> tuple[TaskView, list[Update]]:
    view = TaskView("task_1", "ctx-1", BASE)
    updates = [update for event in events for update in view.add(event)]
    return view, updates


def _states(updates: list[Update]) -> list[str]:
    return [TaskState.Name(u.status.state) for u in updates
            if isinstance(u, TaskStatusUpdateEvent)]  # fmt: skip


def _kind(message: Message) -> str:
    return str(message.metadata["taskyard"]["kind"])


def test_states_as_a2a_names_them() -> None:
    view, updates = _fold(EVENTS)
    states = _states(updates)
    moved = [s for i, s in enumerate(states) if i == 0 or s != states[i - 1]]
    assert moved == ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED",
                     "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]  # fmt: skip
    assert view.ended and view.settled
    assert all(u.task_id == "task_1" and u.context_id == "ctx-1" for u in updates)
    # waiting_tools, then running: both `working` to A2A, so no update of its own
    view, _ = _fold(EVENTS[:11])
    assert view.add(EVENTS[11]) == []
    assert view.add(EVENTS[3]) == []  # nor a token


def test_the_transcript_is_the_history_and_rides_on_the_stream() -> None:
    view, updates = _fold(EVENTS)
    task = view.task()
    assert [_kind(m) for m in task.history] == ["input", "tool_call", "tool_result", "reply"]
    asked, call, result, reply = task.history
    assert asked.role == Role.ROLE_USER and asked.parts[0].text == "What is 6 * 7?"
    assert call.role == Role.ROLE_AGENT and call.parts[0].text.endswith("print(6 * 7)")
    data = call.parts[1].data.struct_value
    assert (data["id"], data["name"]) == ("call-1", "IPythonInterpreter")
    assert result.parts[0].text == "42" and result.metadata["taskyard"]["tool_call_id"] == "call-1"
    assert reply.parts[0].text == "It is 42."
    assert asked.message_id == EVENTS[1].id  # a message's id is its event's
    streamed = [u.status.message for u in updates if isinstance(u, TaskStatusUpdateEvent)
                and u.status.HasField("message")]  # fmt: skip
    assert [m for m in streamed if _kind(m) != "note"] == list(task.history)
    notes = [m.parts[0].text for m in streamed if _kind(m) == "note"]
    assert "IPythonInterpreter (call call-1)" in notes[0] and "approvals/<call id>" in notes[0]
    assert notes[1] == "call call-1 approved"


def test_files_and_the_answer_are_artifacts() -> None:
    view, updates = _fold(EVENTS)
    made = [u.artifact for u in updates if isinstance(u, TaskArtifactUpdateEvent)]
    assert [a.name for a in made] == ["plot.png", ANSWER]
    plot, answer = made
    assert plot.parts[0].url == "http://gateway.test/v1/tasks/t/artifacts/plot.png"
    assert plot.parts[0].media_type == "image/png"
    assert plot.metadata["taskyard"]["call_id"] == "call-1"
    assert answer.parts[0].text == "It is 42."
    assert list(view.task().artifacts) == made


def test_a_task_folded_in_two_halves_is_the_task_read_whole() -> None:
    whole, _ = _fold(EVENTS)
    for cut in range(len(EVENTS) + 1):
        first, _ = _fold(EVENTS[:cut])
        for event in EVENTS[cut:]:
            first.add(event)
        assert first.task() == whole.task()


def test_a_failure_says_why_and_a_wait_for_a_person_settles_a_send() -> None:
    view, _ = _fold(EVENTS[:7])
    assert view.settled and not view.ended  # input-required: a blocking send returns
    failed = _event(20, EventKind.STATUS, {"status": "timed_out", "reason": "past its deadline"})
    (update,) = view.add(failed)
    assert isinstance(update, TaskStatusUpdateEvent)
    assert update.status.state == TaskState.TASK_STATE_FAILED
    assert update.status.message.parts[0].text == "past its deadline"
    assert view.ended
