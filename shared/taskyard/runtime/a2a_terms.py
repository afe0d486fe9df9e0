"""taskyard's tasks in the words of A2A (the Agent2Agent protocol): states by the `TaskState`
name its JSON spells, and an event's time. The gateway's A2A view of a task and the A2A
push notifications that `taskyard.runtime.webhooks` delivers read them here, so the two never
disagree.

A task waiting for a person's approval is ``input-required``: the client's user has to act
(through taskyard's approvals route) before the task goes on. ``timed_out`` is a failure."""

from __future__ import annotations

from datetime import UTC, datetime

from taskyard.runtime.task import TaskStatus

__all__ = ["A2A_PUSH_EVENTS", "A2A_STATES", "INTERRUPTED", "event_time"]

A2A_STATES: dict[TaskStatus, str] = {
    TaskStatus.QUEUED: "TASK_STATE_SUBMITTED",
    TaskStatus.RUNNING: "TASK_STATE_WORKING",
    TaskStatus.WAITING_TOOLS: "TASK_STATE_WORKING",
    TaskStatus.WAITING_APPROVAL: "TASK_STATE_INPUT_REQUIRED",
    TaskStatus.SUCCEEDED: "TASK_STATE_COMPLETED",
    TaskStatus.FAILED: "TASK_STATE_FAILED",
    TaskStatus.CANCELLED: "TASK_STATE_CANCELED",
    TaskStatus.TIMED_OUT: "TASK_STATE_FAILED",
}

# Where a blocking A2A send returns although the task has not ended: someone has to act.
INTERRUPTED = frozenset({"TASK_STATE_INPUT_REQUIRED"})

# The changes an A2A push notification tells of: an end, or a person needed. (Each step's
# `running` and `waiting_tools` are all `working` to an A2A client: not worth a POST each.)
A2A_PUSH_EVENTS = ["waiting_approval", "succeeded", "failed", "cancelled", "timed_out"]


def event_time(event_id: str) -> datetime:
    """When a task's event was written (its stream entry id starts with the milliseconds)."""
    return datetime.fromtimestamp(int(event_id.split("-", 1)[0]) / 1000, UTC)
