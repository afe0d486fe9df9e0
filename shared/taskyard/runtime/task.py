"""A task as the system stores it: its states and its record. API models live in the gateway."""

from __future__ import annotations

import json
import time
import uuid
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field, field_serializer

from taskyard.agentkit.schema import AgentMessage, ToolCall
from taskyard.agentkit.spec import AgentSpec, WebhookSpec
from taskyard.files.info import FileInfo, human_size

__all__ = [
    "SESSION_ID_MAX",
    "SESSION_ID_PATTERN",
    "TERMINAL",
    "TaskRecord",
    "TaskStatus",
    "new_task_id",
]


class TaskStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    WAITING_TOOLS = "waiting_tools"
    WAITING_APPROVAL = "waiting_approval"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"


TERMINAL = frozenset(
    {TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.CANCELLED, TaskStatus.TIMED_OUT}
)


# How long a task's traces outside its record are kept: its tool results and its artifacts
# (each expires this long after it was written; an S3 bucket's lifecycle rule should agree).

SESSION_ID_MAX = 128
SESSION_ID_PATTERN = r"^[A-Za-z0-9_.:-]{1,128}$"  # a caller's session id (its tenant is separate)


def new_task_id() -> str:
    return f"task_{uuid.uuid4().hex}"


class TaskRecord(BaseModel):
    """The `task:{id}` hash, typed. `step` counts committed agent steps."""

    id: str = Field(default_factory=new_task_id)
    tenant: str
    session_id: str
    input: str
    spec: AgentSpec = Field(default_factory=AgentSpec)
    status: TaskStatus = TaskStatus.QUEUED
    step: int = 0
    result: str | None = None
    error: str | None = None
    pending_calls: list[ToolCall] = Field(default_factory=list)  # the current step's tool calls
    files: list[FileInfo] = Field(default_factory=list)  # uploaded files the input refers to
    prompt_tokens: int = 0
    completion_tokens: int = 0
    webhook: WebhookSpec | None = None
    # Seconds it may run, fixed when it is stored (`submission.task_deadline`); None in a
    # record stored before tasks had their own.
    deadline_s: float | None = None
    parent_id: str | None = None  # the task whose agent tool call started this one
    ancestors: list[str] = Field(default_factory=list)  # parent first, then its parent...
    created_at: float = Field(default_factory=time.time)
    updated_at: float = Field(default_factory=time.time)

    @field_serializer("spec")
    def _spec_as_asked(self, spec: AgentSpec) -> dict[str, Any]:
        # Only what the task set: a registered agent's own defaults must not be overridden.
        return spec.model_dump(mode="json", exclude_unset=True)

    def user_message(self) -> AgentMessage:
        """The task's input as the message that starts it; the files it names are listed
        after it, so the model knows they are in the working directory."""
        if not self.files:
            return AgentMessage(sender="user", content=self.input)
        named = ", ".join(f"{f.path} ({human_size(f.size)})" for f in self.files)
        note = f"Files uploaded for this task, in the working directory: {named}."
        return AgentMessage(sender="user", content=f"{self.input}\n\n{note}")

    def deadline(self, default_s: float) -> float:
        """Seconds the task may run: its own, else (an older record) `default_s`."""
        return default_s if self.deadline_s is None else self.deadline_s

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def to_redis(self) -> dict[str, str]:
        """Flat string fields for HSET; nested values as JSON."""
        data = self.model_dump(mode="json")
        return {k: v if isinstance(v, str) else _json(v) for k, v in data.items() if v is not None}

    @classmethod
    def from_redis(cls, fields: dict[str, str]) -> TaskRecord:
        # One JSON document parsed and validated by pydantic-core: half the CPU of
        # `json.loads` per field, then `model_validate` (23 against 46 us, a step's record).
        members = (f'"{k}":{_as_json(k, v)}' for k, v in fields.items() if k in _FIELDS)
        return cls.model_validate_json(f"{{{','.join(members)}}}")


_FIELDS = frozenset(TaskRecord.model_fields)
_JSON_FIELDS = frozenset(
    {
        "spec",
        "pending_calls",
        "ancestors",
        "webhook",
        "files",
        "step",
        "prompt_tokens",
        "completion_tokens",
        "deadline_s",
        "created_at",
        "updated_at",
    }
)


def _json(value: object) -> str:
    return json.dumps(value)


def _as_json(key: str, value: str) -> str:
    # The field names are identifiers: only a text value needs quoting.
    return value if key in _JSON_FIELDS else json.dumps(value)
