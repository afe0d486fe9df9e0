"""The gateway's API models, one per direction; the storage record never leaves as is."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from taskyard.agentkit.schema import AgentMessage
from taskyard.agentkit.spec import WebhookSpec
from taskyard.runtime.forks import Forked
from taskyard.runtime.store.sessions import SessionOverview
from taskyard.runtime.submission import TaskRequest
from taskyard.runtime.task import SESSION_ID_PATTERN, TaskRecord, TaskStatus
from taskyard.sandbox.kernel.files import MAX_PATH_CHARS, path_parts

_INPUT_PREVIEW = 200  # characters of a task's input a summary shows

__all__ = [
    "ApprovalDecided",
    "ApprovalPublic",
    "Interpreter",
    "SessionFork",
    "SessionForked",
    "SessionList",
    "SessionPublic",
    "SessionSummary",
    "SystemView",
    "TaskAccepted",
    "TaskCreate",
    "TaskList",
    "TaskPublic",
    "TaskSummary",
    "WebhookDelivery",
    "WebhookPublic",
    "WebhookSecret",
]


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


class ApprovalPublic(BaseModel):
    """A call of the task's current step held for a person's decision, and that decision."""

    call_id: str
    tool: str
    arguments: dict[str, Any] | str
    state: Literal["pending", "approved", "denied"]
    reason: str | None = None

    @classmethod
    def of(cls, call_id: str, held: dict[str, Any]) -> ApprovalPublic:
        call = held["call"]
        return cls(call_id=call_id, tool=call["name"], arguments=call.get("parameters", {}),
                   state=held["state"], reason=held.get("reason"))  # fmt: skip


class ApprovalDecided(BaseModel):
    call_id: str
    state: Literal["approved", "denied"]


class WebhookPublic(BaseModel):
    """A task's webhook as the API shows it: the headers it asked to send (an A2A push
    config's token and authorization: credentials of the receiver's) are named, not repeated."""

    url: str
    events: list[TaskStatus]
    format: Literal["standard", "a2a"]
    id: str | None = Field(description="The subscriber's name for it (A2A's push config id).")
    sends: list[str] = Field(description="The headers of its own each delivery carries.")

    @classmethod
    def of(cls, spec: WebhookSpec | None) -> WebhookPublic | None:
        if spec is None:
            return None
        asked = {"authorization": spec.authorization, "x-a2a-notification-token": spec.token}
        sends = [name for name, value in asked.items() if value is not None]
        events = [TaskStatus(event) for event in spec.events]
        return cls(url=spec.url, events=events, format=spec.format, id=spec.id, sends=sends)


class WebhookDelivery(BaseModel):
    """One state change told (or being told) to the task's webhook."""

    event_id: str = Field(description="Also the delivery's `webhook-id` header.")
    type: str
    state: Literal["delivered", "retrying", "failed", "refused"]
    attempts: int
    status_code: int | None
    error: str | None
    at: float


class WebhookSecret(BaseModel):
    """`GET /v1/webhooks/secret`: what the tenant's deliveries are signed with."""

    secret: str = Field(description='"whsec_" + base64 key, as Standard Webhooks libraries take.')


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


class Interpreter(BaseModel):
    """The session's interpreter as its tool worker last reported it."""

    alive: bool
    last_used: float = Field(description="Unix time of its last call; 0 before the first.")
    worker: str | None = Field(default=None, description="The tool worker holding it.")
    lost: str | None = Field(
        default=None, description="Why its state was lost (the next call starts afresh)."
    )


class SessionPublic(BaseModel):
    """`GET /v1/sessions/{id}`: a page of its messages, its latest tasks, who holds it."""

    id: str
    messages: list[AgentMessage] = Field(description="A page of the memory asked for.")
    total_messages: int
    memories: dict[str, int] = Field(
        description="Each memory of the agent tree (`memory`, `writer.memory`, ...): its length."
    )
    values: dict[str, Any] = Field(description="The agent tree's session values by path.")
    tasks: list[str] = Field(description="Its latest tasks' ids, newest first.")
    running: str | None = Field(description="The task holding the session now, if any.")
    waiting: list[str] = Field(description="Tasks waiting their turn, oldest first.")
    interpreter: Interpreter | None
    forked_from: str | None = Field(default=None, description="The session it was forked from.")


class SessionSummary(BaseModel):
    """A session in a list: where it stands, without its messages."""

    id: str
    last_task_at: float = Field(description="When its latest task was submitted.")
    task_count: int = Field(description="How many tasks it has had.")
    running: str | None = Field(description="The task holding the session now, if any.")
    waiting: int = Field(description="How many tasks wait their turn.")
    total_messages: int = Field(description="The messages in its (top agent's) memory.")
    interpreter: Interpreter | None
    forked_from: str | None = Field(default=None, description="The session it was forked from.")

    @classmethod
    def of(cls, overview: SessionOverview) -> SessionSummary:
        interpreter = Interpreter(**overview.interpreter) if overview.interpreter else None
        return cls(
            id=overview.session_id, last_task_at=overview.last_task_at,
            task_count=overview.task_count, running=overview.running, waiting=overview.waiting,
            total_messages=overview.total_messages, interpreter=interpreter,
            forked_from=overview.forked_from,
        )  # fmt: skip


class SessionFork(BaseModel):
    """`POST /v1/sessions/{id}/fork` body."""

    model_config = ConfigDict(extra="forbid")

    session_id: str | None = Field(
        default=None, pattern=SESSION_ID_PATTERN,
        description="The new session's id (unused: 409 otherwise); one is made when absent.",
    )  # fmt: skip


class SessionForked(BaseModel):
    """A new session forked from another: a copy of its memory and, live, of its
    interpreter."""

    session_id: str = Field(description="The new session's id.")
    forked_from: str = Field(description="The session it is a copy of.")
    interpreter: Literal["copied", "none"] = Field(
        description="`copied`: the source's running interpreter was copied, state and all; "
        "`none`: the source had no running interpreter (the new session starts a fresh one)."
    )

    @classmethod
    def of(cls, forked: Forked) -> SessionForked:
        return cls(session_id=forked.session_id, forked_from=forked.forked_from,
                   interpreter=forked.interpreter)  # fmt: skip


class SessionList(BaseModel):
    """`GET /v1/sessions`: a page of the tenant's sessions, the most recently used first."""

    sessions: list[SessionSummary]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null: done.")


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
