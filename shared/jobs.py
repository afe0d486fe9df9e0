"""Every Celery job taskyard sends: its payload (one pydantic model) and the one function that
enqueues it. The gateway and the workers send and take jobs only through this module, so a
payload is validated once, where the job starts."""

from __future__ import annotations

from typing import Any

from celery import Celery
from pydantic import BaseModel, ConfigDict, Field

from shared import keys
from shared.actions import action_queue
from shared.schema import ToolCall

__all__ = ["AgentStepJob", "ToolRunJob", "enqueue_agent_step", "enqueue_tool_run"]


class _Job(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def payload(self) -> dict[str, Any]:
        """The JSON the job travels as (Celery's JSON serializer)."""
        return self.model_dump(mode="json")


class AgentStepJob(_Job):
    """Run step `step` of a task (a stale or duplicate step does nothing). The task's tenant
    and session come along, so the step reads the session's memory in its first round trip."""

    task_id: str
    step: int = Field(ge=0)
    tenant: str
    session_id: str


class ToolRunJob(_Job):
    """Run one tool call of a task's step in the session's tool state."""

    task_id: str
    step: int = Field(ge=0)
    tenant: str
    session_id: str
    call: ToolCall

    @property
    def session_key(self) -> str:
        """Tool state (sandboxes, browser results) is per tenant and session."""
        return f"{self.tenant}:{self.session_id}"


def enqueue_agent_step(celery: Celery, job: AgentStepJob) -> None:
    celery.send_task(keys.AGENT_STEP_TASK, args=[job.payload()], queue=keys.AGENT_QUEUE)


def enqueue_tool_run(celery: Celery, job: ToolRunJob) -> None:
    celery.send_task(keys.TOOL_RUN_TASK, args=[job.payload()], queue=action_queue(job.call.name))
