"""The tasks' API models, one per direction; the storage record never leaves as is."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field, field_validator, model_validator

from services.gateway.resources.approvals.models import ApprovalPublic
from services.gateway.resources.webhooks.models import WebhookDelivery, WebhookPublic
from taskyard.agentkit.schema import AgentMessage
from taskyard.runtime.submission import TaskRequest
from taskyard.runtime.task import TaskRecord, TaskStatus
from taskyard.sandbox.kernel.files import MAX_PATH_CHARS, path_parts

_INPUT_PREVIEW = 200  # characters of a task's input a summary shows

__all__ = ["TaskAccepted", "TaskCreate", "TaskList", "TaskPublic", "TaskSummary"]


class TaskCreate(TaskRequest):
    """`POST /v1/tasks` body."""

    files: list[Annotated[str, Field(min_length=1, max_length=MAX_PATH_CHARS)]] = Field(
        default_factory=list,
        max_length=32,
        description="Files uploaded to the session (`POST /v1/sessions/{session_id}/files`) "
        "that the task works on, by path; the model is told they are in its working "
        "directory. Needs `session_id`.",
    )

    @field_validator("files")
    @classmethod
    def _paths_in_the_working_directory(cls, paths: list[str]) -> list[str]:
        for path in paths:
            path_parts(path)  # its ValueError says what is wrong
        return paths

    @model_validator(mode="after")
    def _files_live_in_a_session(self) -> TaskCreate:
        if self.files and self.session_id is None:
            raise ValueError("files are a session's: give the session_id they were uploaded to")
        return self


class TaskAccepted(BaseModel):
    id: str
    status: TaskStatus
    session_id: str


class TaskSummary(BaseModel):
    """A task in a list: where it stands, without its messages."""

    id: str
    status: TaskStatus
    session_id: str
    step: int
    input: str = Field(description=f"The first {_INPUT_PREVIEW} characters of the input.")
    error: str | None
    created_at: float
    updated_at: float

    @classmethod
    def of(cls, record: TaskRecord) -> TaskSummary:
        return cls(
            id=record.id, status=record.status, session_id=record.session_id, step=record.step,
            input=record.input[:_INPUT_PREVIEW], error=record.error,
            created_at=record.created_at, updated_at=record.updated_at,
        )  # fmt: skip


class TaskPublic(BaseModel):
    id: str
    status: TaskStatus
    session_id: str
    step: int
    result: str | None
    error: str | None
    usage: dict[str, int]
    created_at: float
    updated_at: float
    deadline_s: float = Field(description="Seconds it may run before it ends timed_out.")
    deadline_at: float = Field(description="When it times out, if live: created_at + deadline_s.")
    messages: list[AgentMessage]
    approvals: list[ApprovalPublic] = Field(
        description="Calls of its current step held for approval."
    )
    parent_id: str | None = Field(description="The task whose agent tool call started this one.")
    children: list[TaskSummary] = Field(description="The tasks its agent tool calls started.")
    webhook: WebhookPublic | None
    webhook_deliveries: list[WebhookDelivery] = Field(
        description="Its webhook deliveries so far, oldest first."
    )

    @classmethod
    def of(
        cls,
        record: TaskRecord,
        messages: list[AgentMessage],
        approvals: dict[str, dict[str, Any]] | None = None,
        children: list[TaskRecord] | None = None,
        deliveries: list[dict[str, Any]] | None = None,
        *,
        deadline_s: float,
    ) -> TaskPublic:
        usage = {
            "prompt_tokens": record.prompt_tokens,
            "completion_tokens": record.completion_tokens,
        }
        return cls(
            id=record.id,
            status=record.status,
            session_id=record.session_id,
            step=record.step,
            result=record.result,
            error=record.error,
            usage=usage,
            created_at=record.created_at,
            updated_at=record.updated_at,
            deadline_s=deadline_s,
            deadline_at=record.created_at + deadline_s,
            messages=messages,
            approvals=[ApprovalPublic.of(k, v) for k, v in (approvals or {}).items()],
            parent_id=record.parent_id,
            children=[TaskSummary.of(c) for c in children or []],
            webhook=WebhookPublic.of(record.webhook),
            webhook_deliveries=[WebhookDelivery.model_validate(d) for d in deliveries or []],
        )


class TaskList(BaseModel):
    """`GET /v1/tasks`: a page of the tenant's tasks, newest first."""

    tasks: list[TaskSummary]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null: done.")
