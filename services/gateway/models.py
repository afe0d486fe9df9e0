"""The gateway's API models, one per direction; the storage record never leaves as is."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from shared.schema import AgentMessage
from shared.spec import AgentSpec
from shared.task import TaskRecord, TaskStatus

__all__ = ["SystemView", "TaskAccepted", "TaskCreate", "TaskList", "TaskPublic", "TaskSummary"]

_INPUT_PREVIEW = 200  # characters of a task's input a summary shows


class TaskCreate(BaseModel):
    """`POST /v1/tasks` body."""

    model_config = ConfigDict(extra="forbid")

    input: str = Field(min_length=1, max_length=200_000, description="The user's message.")
    session_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9_.:-]+$",
        description="Tasks of one session share memory and interpreter; a new one if unset.",
    )
    agent: AgentSpec = Field(default_factory=AgentSpec)
    if_session_busy: Literal["wait", "reject"] = Field(
        default="wait", description="When the session runs another task: queue behind it, or 409."
    )


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


class TaskSummary(BaseModel):
    """A task in a list: what it is and where it stands, without its messages."""

    id: str
    status: TaskStatus
    session_id: str
    step: int
    input: str = Field(description=f"The first {_INPUT_PREVIEW} characters of the input.")
    created_at: float
    updated_at: float

    @classmethod
    def of(cls, record: TaskRecord) -> TaskSummary:
        return cls(
            id=record.id,
            status=record.status,
            session_id=record.session_id,
            step=record.step,
            input=record.input[:_INPUT_PREVIEW],
            created_at=record.created_at,
            updated_at=record.updated_at,
        )


class TaskList(BaseModel):
    """`GET /v1/tasks`: the newest first; `next_cursor` fetches the page after (null: none)."""

    tasks: list[TaskSummary]
    next_cursor: str | None


class QueueDepth(BaseModel):
    name: str
    depth: int


class ReplicaState(BaseModel):
    name: str
    model: str
    healthy: bool
    in_flight: int
    latency_ms: float


class SystemView(BaseModel):
    """What runs the tasks: the queues' depths, the workers that answered a ping just now,
    and the LLM proxy's replicas (empty while the proxy does not answer)."""

    queues: list[QueueDepth]
    workers: list[str]
    replicas: list[ReplicaState]
