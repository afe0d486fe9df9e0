"""A task made to wait on a tool call, straight in the store: what a tool worker's runner is
handed without the rest of the stack (its tests, the capacity bench's runner alone)."""

from __future__ import annotations

from taskyard.agentkit.schema import AgentMessage, ToolCall
from taskyard.runtime.jobs import ToolRunJob
from taskyard.runtime.store import StepCommit, TaskStore
from taskyard.runtime.task import TaskRecord, TaskStatus

__all__ = ["waiting_on"]


async def waiting_on(
    store: TaskStore, call: ToolCall, tenant: str = "t", session_id: str = "s"
) -> ToolRunJob:
    """A new task whose step 0 called `call` and waits for its result, and the call's job."""
    record = TaskRecord(tenant=tenant, session_id=session_id, input="hi")
    calls = [call.model_dump(mode="json")]
    turn = AgentMessage(sender="assistant", content="", formatted={"tool_calls": calls})
    commit = StepCommit(record, TaskStatus.WAITING_TOOLS, {"memory": [turn]}, [turn],
                        fields={"pending_calls": calls})  # fmt: skip
    await store.create(record)
    committed, _ = await store.commit_step(commit)
    if not committed:
        raise RuntimeError(f"task {record.id}'s step 0 was not committed")
    return ToolRunJob(task_id=record.id, step=0, tenant=tenant, session_id=session_id, call=call)
