"""The schedules' response bodies (the request is `taskyard.runtime.schedules.ScheduleRequest`)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from taskyard.runtime.schedules import MissedPolicy, RunOutcome, Schedule, ScheduleRun
from taskyard.runtime.submission import TaskRequest
from taskyard.runtime.task import TaskRecord, TaskStatus

__all__ = ["ScheduleList", "SchedulePublic", "ScheduleRunList", "ScheduleRunPublic"]


class SchedulePublic(BaseModel):
    """A schedule: its cron, its task, when it runs next, what it did so far."""

    id: str
    name: str | None
    cron: str
    missed: MissedPolicy
    task: TaskRequest
    created_at: float
    next_run_at: float = Field(description="Its next run time (UTC, seconds since the epoch).")
    last_run_at: float | None = Field(description="When it last submitted a task.")
    runs: int = Field(description="Tasks it submitted.")
    missed_runs: int = Field(description="Run times that went unrun (missed, skipped, refused).")

    @classmethod
    def of(cls, schedule: Schedule) -> SchedulePublic:
        return cls.model_validate(schedule.model_dump(exclude={"tenant"}))


class ScheduleList(BaseModel):
    """`GET /v1/schedules`: the tenant's schedules, newest first."""

    schedules: list[SchedulePublic]


class ScheduleRunPublic(BaseModel):
    """One time a schedule came due, with its task's status now."""

    fire_at: float = Field(description="The run time (the latest, when several were missed).")
    at: float = Field(description="When the scheduler acted on it.")
    outcome: RunOutcome
    task_id: str | None
    status: TaskStatus | None = Field(description="The task's status now, if it made one.")
    late: bool = Field(description="Acted on past its grace: the scheduler was down or slow.")
    missed: int = Field(description="Run times this one left unrun.")
    reason: str | None = Field(description="Why no task was made, if none was.")

    @classmethod
    def of(cls, run: ScheduleRun, task: TaskRecord | None) -> ScheduleRunPublic:
        return cls(**run.model_dump(), status=task.status if task else None)


class ScheduleRunList(BaseModel):
    """`GET /v1/schedules/{id}/runs`: its latest runs, newest first."""

    runs: list[ScheduleRunPublic]
