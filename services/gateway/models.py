"""The gateway's API models, one per direction; the storage record never leaves as is."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from shared.sandbox.kernel.files import MAX_PATH_CHARS, path_parts
from shared.schema import AgentMessage
from shared.spec import AgentSpec
from shared.task import SESSION_ID_MAX, SESSION_ID_PATTERN, TaskRecord, TaskStatus

__all__ = ["TaskAccepted", "TaskCreate", "TaskPublic"]


class TaskCreate(BaseModel):
    """`POST /v1/tasks` body."""

    model_config = ConfigDict(extra="forbid")

    input: str = Field(min_length=1, max_length=200_000, description="The user's message.")
    session_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=SESSION_ID_MAX,
        pattern=SESSION_ID_PATTERN,
        description="Tasks of one session share memory and interpreter; a new one if unset.",
    )
    files: list[Annotated[str, Field(min_length=1, max_length=MAX_PATH_CHARS)]] = Field(
        default_factory=list,
        max_length=32,
        description="Files uploaded to the session (`POST /v1/sessions/{session_id}/files`) "
        "that the task works on, by path; the model is told they are in its working "
        "directory. Needs `session_id`.",
    )
    agent: AgentSpec = Field(default_factory=AgentSpec)
    if_session_busy: Literal["wait", "reject"] = Field(
        default="wait", description="When the session runs another task: queue behind it, or 409."
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
    messages: list[AgentMessage]

    @classmethod
    def of(cls, record: TaskRecord, messages: list[AgentMessage]) -> TaskPublic:
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
            messages=messages,
        )
