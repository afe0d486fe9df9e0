"""What a schedule is: what a tenant asks for (`ScheduleRequest`), what is stored
(`Schedule`), and each time it came due (`ScheduleRun`)."""

from __future__ import annotations

import uuid
from typing import Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

from taskyard.runtime.schedules.cron import MissedPolicy
from taskyard.runtime.submission import TaskRequest

__all__ = ["RunOutcome", "Schedule", "ScheduleRequest", "ScheduleRun"]

# What a run time came to: a task made (or found, for a run retried after a crash), skipped
# as missed, refused because the session was busy (the task's `if_session_busy` is
# `reject`), or refused by the submission's checks (an agent since removed, a webhook URL).
RunOutcome = Literal["submitted", "skipped", "busy", "refused"]


class ScheduleRequest(BaseModel):
    """`POST /v1/schedules` body: a cron, what to do about runs missed while the scheduler
    was down, and the task each run submits."""

    model_config = ConfigDict(extra="forbid")

    cron: str = Field(
        min_length=1, max_length=128,
        description="Five fields (minute hour day month weekday), or six with seconds last; "
        "UTC. `@hourly`, `@daily` and the like too.",
    )  # fmt: skip
    missed: MissedPolicy = Field(
        default="run_once",
        description="Run times missed while the scheduler was down: `run_once` (one late run "
        "for all of them) or `skip` (none; the next on-time run goes ahead).",
    )
    name: str | None = Field(default=None, min_length=1, max_length=128)
    task: TaskRequest = Field(
        description="The task each run submits, as `POST /v1/tasks` takes it: without "
        "`session_id`, each run starts a fresh session; with one, the runs share it."
    )


class Schedule(BaseModel):
    """A stored schedule."""

    id: str = Field(default_factory=lambda: f"sch_{uuid.uuid4().hex}")
    tenant: str
    name: str | None = None
    cron: str
    missed: MissedPolicy
    task: TaskRequest
    created_at: float
    next_run_at: float
    last_run_at: float | None = None
    runs: int = 0  # tasks submitted
    missed_runs: int = 0  # run times that went unrun

    def to_redis(self) -> dict[str, str]:
        """Field by field (the tick moves `next_run_at` and the counters in place)."""
        fields = self.model_dump(mode="json", exclude={"task"}, exclude_none=True)
        return {**{k: str(v) for k, v in fields.items()}, "task": self.task.model_dump_json()}

    @classmethod
    def from_redis(cls, fields: dict[str, str]) -> Schedule:
        return cls.model_validate({**fields, "task": orjson.loads(fields["task"])})


class ScheduleRun(BaseModel):
    """One time a schedule came due."""

    fire_at: float = Field(description="The run time (the latest, when several were missed).")
    at: float = Field(description="When the scheduler acted on it.")
    outcome: RunOutcome
    task_id: str | None = None
    late: bool = Field(default=False, description="Past its grace: beat was down, or slow.")
    missed: int = Field(default=0, description="Run times this tick left unrun.")
    reason: str | None = None
