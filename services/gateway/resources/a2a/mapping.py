"""taskyard's tasks in A2A's terms, and a client's message as a task's input.

`TaskView` folds one task's events, oldest first, into what an A2A client sees: `add(event)`
returns the A2A updates the event makes (status and artifact updates) and `task()` is the A2A
`Task` so far. The stream, the snapshot a subscription starts with, `GetTask` and a blocking
send are all this one fold, so they cannot disagree.

- The transcript (the input, each reply, each tool call and each tool result) is the task's
  `history`; on a stream each message rides on a status update. A message's id is its event's
  id, so a client can tell what it has seen already.
- A status change is a status update; consecutive states that read the same to A2A (running,
  waiting for tools: both `working`) are one. What a person should know about a state (why
  the task failed, which calls wait for approval, a spent model budget) is the status's
  message, not part of the history.
- A file a tool made is an artifact (a URL part: `GET /v1/tasks/{id}/artifacts/{name}`, with
  the same API key); the final answer is the artifact named ``answer``.
- The model's tokens as they stream and compaction notices are not shown.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import urljoin

from a2a.helpers.proto_helpers import get_data_parts, new_data_part, new_text_part
from a2a.types import (
    Artifact,
    ContentTypeNotSupportedError,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

from taskyard.agentkit.schema import ActionReturn, AgentMessage
from taskyard.runtime.a2a_terms import A2A_STATES, INTERRUPTED, event_time
from taskyard.runtime.events import Event, EventKind
from taskyard.runtime.task import TaskStatus as TaskyardStatus

__all__ = ["ANSWER", "TaskView", "Update", "task_input"]

Update = TaskStatusUpdateEvent | TaskArtifactUpdateEvent
ANSWER = "answer"  # the artifact holding the task's final answer

_FINAL = frozenset(
    TaskState.Value(name) for name in ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED",
                                       "TASK_STATE_CANCELED", "TASK_STATE_REJECTED")
)  # fmt: skip
_INTERRUPTED = frozenset(TaskState.Value(name) for name in INTERRUPTED)


class TaskView:
    """One task as an A2A client sees it, folded from its events in order."""

    def __init__(self, task_id: str, context_id: str, base_url: str) -> None:
        self.task_id = task_id
        self.context_id = context_id
        self.base_url = base_url  # the gateway's, for artifacts' URLs
        self.status = TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)
        self.history: list[Message] = []
        self.artifacts: list[Artifact] = []

    @property
    def ended(self) -> bool:
        return self.status.state in _FINAL

    @property
    def settled(self) -> bool:
        """Ended, or waiting for a person: where a blocking send returns."""
        return self.ended or self.status.state in _INTERRUPTED

    def add(self, event: Event) -> list[Update]:
        """Fold in the task's next event; the updates it makes, in order."""
        return _FOLDS[event.kind](self, event)

    def task(self) -> Task:
        return Task(id=self.task_id, context_id=self.context_id, status=self.status,
                    artifacts=self.artifacts, history=self.history)  # fmt: skip

    # -- one method per kind of event --------------------------------------------------------

    def _status(self, event: Event) -> list[Update]:
        status = TaskyardStatus(event.data["status"])
        updates: list[Update] = []
        if result := event.data.get("result"):
            answer = Artifact(artifact_id=ANSWER, name=ANSWER, parts=[new_text_part(str(result))])
            updates.append(self._artifact(answer))
        reason = event.data.get("error") or event.data.get("reason")
        note = self._note(event.id, str(reason)) if reason else None
        state = TaskState.Value(A2A_STATES[status])
        if state != self.status.state or note is not None:
            updates.append(self._moved(state, event, note))
        return updates

    def _message(self, event: Event) -> list[Update]:
        message = self._transcribed(event.id, AgentMessage.model_validate(event.data))
        self.history.append(message)
        status = TaskStatus(
            state=self.status.state, message=message, timestamp=event_time(event.id)
        )
        return [self._update(status)]

    def _file(self, event: Event) -> list[Update]:
        data = event.data
        url = urljoin(self.base_url, str(data.get("url") or ""))
        about = {k: data[k] for k in ("kind", "size", "width", "height", "call_id", "step")
                 if data.get(k) is not None}  # fmt: skip
        part = Part(url=url, media_type=str(data.get("mime") or ""), filename=str(data["name"]))
        artifact = Artifact(artifact_id=str(data["name"]), name=str(data["name"]), parts=[part],
                            metadata={"taskyard": about})  # fmt: skip
        return [self._artifact(artifact)]

    def _approval_requested(self, event: Event) -> list[Update]:
        calls = event.data.get("calls", [])
        named = ", ".join(f"{c.get('tool')} (call {c.get('id')})" for c in calls)
        text = (f"waiting for a person's approval of {named}: POST "
                f"/v1/tasks/{self.task_id}/approvals/<call id> decides")  # fmt: skip
        note = self._note(event.id, text, {"calls": calls})
        return [self._moved(TaskState.TASK_STATE_INPUT_REQUIRED, event, note)]

    def _approval_decided(self, event: Event) -> list[Update]:
        data = event.data
        reason = f": {data['reason']}" if data.get("reason") else ""
        return self._noted(event, f"call {data.get('call_id')} {data.get('state')}{reason}")

    def _child(self, event: Event) -> list[Update]:
        data = event.data
        return self._noted(event, f"child task {data.get('task_id')}: {data.get('status')}")

    def _rate_limited(self, event: Event) -> list[Update]:
        data = event.data
        text = f"waiting {data.get('retry_in_s')} s: {data.get('reason')}"
        return self._noted(event, text)

    def _unshown(self, event: Event) -> list[Update]:
        return []

    # -- the parts they share ----------------------------------------------------------------

    def _noted(self, event: Event, text: str) -> list[Update]:
        return [self._moved(self.status.state, event, self._note(event.id, text))]

    def _moved(self, state: TaskState, event: Event, note: Message | None) -> Update:
        self.status = TaskStatus(state=state, message=note, timestamp=event_time(event.id))
        return self._update(self.status)

    def _update(self, status: TaskStatus) -> TaskStatusUpdateEvent:
        return TaskStatusUpdateEvent(task_id=self.task_id, context_id=self.context_id,
                                     status=status)  # fmt: skip

    def _artifact(self, artifact: Artifact) -> TaskArtifactUpdateEvent:
        self.artifacts.append(artifact)
        return TaskArtifactUpdateEvent(task_id=self.task_id, context_id=self.context_id,
                                       artifact=artifact, last_chunk=True)  # fmt: skip

    def _note(self, event_id: str, text: str, data: dict[str, Any] | None = None) -> Message:
        parts = [new_text_part(text), *([new_data_part(data)] if data else [])]
        return self._a2a_message(event_id, Role.ROLE_AGENT, parts, {"kind": "note"})

    def _transcribed(self, event_id: str, message: AgentMessage) -> Message:
        kind, parts = _parts_of(message)
        about: dict[str, Any] = {"kind": kind, "sender": message.sender}
        if message.tool_call_id:
            about["tool_call_id"] = message.tool_call_id
        role = Role.ROLE_USER if kind == "input" else Role.ROLE_AGENT
        return self._a2a_message(event_id, role, parts, about)

    def _a2a_message(
        self, event_id: str, role: Role, parts: list[Part], about: dict[str, Any]
    ) -> Message:
        return Message(message_id=event_id, context_id=self.context_id, task_id=self.task_id,
                       role=role, parts=parts, metadata={"taskyard": about})  # fmt: skip


_FOLDS: dict[EventKind, Callable[[TaskView, Event], list[Update]]] = {
    EventKind.STATUS: TaskView._status,
    EventKind.MESSAGE: TaskView._message,
    EventKind.ARTIFACT: TaskView._file,
    EventKind.APPROVAL_REQUESTED: TaskView._approval_requested,
    EventKind.APPROVAL_DECIDED: TaskView._approval_decided,
    EventKind.CHILD: TaskView._child,
    EventKind.RATE_LIMITED: TaskView._rate_limited,
    EventKind.TOKEN: TaskView._unshown,
    EventKind.MEMORY_COMPACTED: TaskView._unshown,
}


def _parts_of(message: AgentMessage) -> tuple[str, list[Part]]:
    """What kind of transcript message this is (input, reply, tool_call, tool_result) and its
    parts: text for people, a data part with each tool call for programs."""
    content = message.content
    if isinstance(content, ActionReturn):
        text = content.format_result() + (f"\n{content.errmsg}" if content.errmsg else "")
        return "tool_result", [new_text_part(text.strip())]
    text = content if isinstance(content, str) else "" if content is None else json.dumps(content)
    parts = [new_text_part(text)] if text.strip() else []
    calls = message.tool_calls
    for call in calls:
        params = call.parameters
        code = params.get("command") if isinstance(params, dict) else None
        shown = code if isinstance(code, str) else json.dumps(params)
        parts.append(new_text_part(f"[calls {call.name}]\n{shown}"))
        parts.append(new_data_part({"id": call.id, "name": call.name, "arguments": params}))
    kind = "tool_call" if calls else "input" if message.sender == "user" else "reply"
    return kind, parts or [new_text_part("")]


def task_input(message: Message) -> str:
    """A task's input from a client's message: its text parts, and its data parts as JSON,
    in order. A file (inline or by URL) is refused: a session's files are uploaded through
    `POST /v1/sessions/{id}/files`."""
    texts = []
    for part in message.parts:
        content = part.WhichOneof("content")
        if content == "text":
            texts.append(part.text)
        elif content == "data":
            texts.append(json.dumps(get_data_parts([part])[0]))
        else:
            raise ContentTypeNotSupportedError(
                message=f"a {content or 'empty'} part: this agent takes text and data parts"
            )
    return "\n\n".join(texts)
