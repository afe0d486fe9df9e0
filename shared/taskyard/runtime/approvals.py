"""Human approval of tool calls: a person's decision, and what it does to the task.

An agent spec may name tools whose calls wait for a person (`AgentSpec.approval`). The step
that makes such calls holds them (the task waits in `waiting_approval`, holding no worker)
and runs the others. `decide` applies a decision: an approved call (its arguments as the
person left them) goes out as a tool job; a denied one gets the denial, with its reason, as
its result, so the model reads it and adapts. The gateway decides for people, the sweep
denies calls nobody decided on in time.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from celery import Celery
from pydantic import BaseModel, ConfigDict, Field

from taskyard.agentkit.schema import ActionReturn, ActionStatusCode, AgentMessage, ToolCall
from taskyard.runtime.jobs import AgentStepJob, envelope, job_for_call
from taskyard.runtime.store import TaskStore
from taskyard.runtime.task import TaskRecord

__all__ = ["Decision", "Outcome", "decide"]


class Decision(BaseModel):
    """`POST /v1/tasks/{id}/approvals/{call_id}` body."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "deny"]
    reason: str | None = Field(default=None, max_length=2000)
    arguments: dict[str, Any] | None = Field(
        default=None, description="Approve with these arguments instead of the model's."
    )


class Outcome(StrEnum):
    APPROVED = "approved"
    DENIED = "denied"
    UNKNOWN = "unknown"  # no such call waits for a decision
    DECIDED = "decided"  # decided already


async def decide(
    store: TaskStore, celery: Celery, record: TaskRecord, call_id: str, decision: Decision
) -> Outcome:
    """Apply `decision` to the held call `call_id` of the task's current step. A call decided
    before is `DECIDED` also once its step is over (the task may have moved on the moment
    the decision let it); a call never held is `UNKNOWN`."""
    step = record.step - 1
    held = (await store.approvals(record.id, step)).get(call_id) if step >= 0 else None
    if held is None:
        return (
            Outcome.DECIDED if await store.was_held(record.id, step, call_id) else Outcome.UNKNOWN
        )
    if held["state"] != "pending":
        return Outcome.DECIDED
    call = ToolCall.model_validate(held["call"])
    next_step = envelope(celery, AgentStepJob.again(record))
    if decision.decision == "approve":
        if decision.arguments is not None:
            call = call.model_copy(update={"parameters": decision.arguments})
        job = job_for_call(record.id, step, record.tenant, record.session_id, call, record.spec)
        decided = {"state": "approved", "call": call.model_dump(mode="json")}
        outcome, _ = await store.decide_approval(record, call, decided, envelope(celery, job),
                                                 None, next_step)  # fmt: skip
    else:
        reason = decision.reason or "no reason given"
        decided = {"state": "denied", "call": held["call"], "reason": reason}
        outcome, _ = await store.decide_approval(record, call, decided, None,
                                                 denial(call, reason), next_step)  # fmt: skip
    return Outcome(outcome)


def denial(call: ToolCall, reason: str) -> AgentMessage:
    """The result a denied call gets: an error the model reads, with the person's reason."""
    ret = ActionReturn(
        type=call.name,
        state=ActionStatusCode.API_ERROR,
        errmsg=f"A person denied this call: {reason}",
        args=call.parameters if isinstance(call.parameters, dict) else None,
    )
    return AgentMessage.tool_result(call, ret)
