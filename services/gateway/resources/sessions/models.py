"""The sessions' bodies: a session with a page of its messages, a page of sessions, a fork's
request and answer."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from taskyard.agentkit.schema import AgentMessage
from taskyard.runtime.forks import Forked
from taskyard.runtime.store.sessions import SessionOverview
from taskyard.runtime.task import SESSION_ID_PATTERN

__all__ = [
    "Interpreter",
    "SessionFork",
    "SessionForked",
    "SessionList",
    "SessionPublic",
    "SessionSummary",
]


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


class SessionList(BaseModel):
    """`GET /v1/sessions`: a page of the tenant's sessions, the most recently used first."""

    sessions: list[SessionSummary]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null: done.")


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
    skipped: dict[str, str] = Field(
        default_factory=dict,
        description="What a copied interpreter left out, each with why: names that cannot be "
        "copied (a socket, a thread, a generator) and files of its working directory that "
        "could not be. The new session's `__fork_skipped__` holds the names' part.",
    )

    @classmethod
    def of(cls, forked: Forked) -> SessionForked:
        return cls(session_id=forked.session_id, forked_from=forked.forked_from,
                   interpreter=forked.interpreter, skipped=forked.skipped)  # fmt: skip
