"""Child tasks: an agent tool call (``agent:researcher``) of a step runs as a task of its own.

The child gets an id derived from its parent's call (so a redelivered job makes the same
child), the parent's tenant, its own session unless the call names one, and the registered
agent as its spec. What it must hand back travels in its task hash: the parent's step and
call, the tool-result message to fill in, and the parent's next step's job. The store's
scripts deliver it when the child ends (`deliver_to_parent` in prelude.lua), in the same
atomic write as the child's end: the parent then goes on like after any tool result.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import orjson
from celery import Celery

from taskyard.agentkit.agents import AGENTS
from taskyard.agentkit.agents.as_tool import agent_of
from taskyard.agentkit.schema import ActionReturn, ActionStatusCode, AgentMessage, ToolCall
from taskyard.agentkit.spec import AgentSpec
from taskyard.plumbing.settings import AgentWorkerSettings
from taskyard.runtime.jobs import AgentStepJob, ChildJob, envelope
from taskyard.runtime.store import TaskStore
from taskyard.runtime.submission import task_deadline
from taskyard.runtime.task import SESSION_ID_PATTERN, TaskRecord

__all__ = ["ChildStarter"]

_SESSION = re.compile(SESSION_ID_PATTERN)


class ChildStarter:
    """Starts the child task of an agent tool call, or answers the call with why it can't."""

    def __init__(self, store: TaskStore, settings: AgentWorkerSettings, celery: Celery) -> None:
        self.store = store
        self.settings = settings
        self.celery = celery

    async def start(self, job: ChildJob) -> None:
        parent = await self.store.get(job.task_id)
        if parent is None or parent.terminal or parent.step != job.step + 1:
            return  # ended, or this step's calls are done with
        next_step = envelope(self.celery, AgentStepJob.again(parent))
        task, session, problem = _asked(job.call)
        if problem is not None:
            await self.store.put_tool_result(parent.id, job.step, job.call.id,
                                             _refusal(job.call, problem), next_step)  # fmt: skip
            return
        child = _child(parent, job, task, session)
        first = envelope(self.celery, AgentStepJob.first(child))
        extra = {
            "parent_step": str(job.step),
            "parent_call_id": job.call.id,
            "parent_result": AgentMessage.tool_result(
                job.call, ActionReturn(type=job.call.name)
            ).model_dump_json(),
            "parent_next_queue": next_step.queue,
            "parent_next_message": next_step.message,
        }
        child.deadline_s = deadline_s = task_deadline(child.spec, child.tenant, self.settings)
        await self.store.create(child, first, deadline_s=deadline_s, extra=extra)


def _asked(call: ToolCall) -> tuple[str, str | None, str | None]:
    """The call's task text and session, or the problem with them (for the model)."""
    args: Any = call.parameters
    if isinstance(args, str):
        try:
            args = orjson.loads(args or "{}")
        except orjson.JSONDecodeError:
            return "", None, "the arguments are not JSON"
    if not isinstance(args, dict) or not isinstance(args.get("task"), str) or not args["task"]:
        return "", None, 'give the agent a "task": the text of what it is to do'
    session = args.get("session_id")
    if session is not None and not (isinstance(session, str) and _SESSION.fullmatch(session)):
        return "", None, f"session_id must match {SESSION_ID_PATTERN}"
    if agent_of(call.name) not in AGENTS:
        return "", None, f"no agent {agent_of(call.name)!r} is registered here"
    return args["task"], session, None


def _child(parent: TaskRecord, job: ChildJob, task: str, session: str | None) -> TaskRecord:
    seed = f"{parent.id}|{job.step}|{job.call.id}".encode()
    child_id = f"task_{hashlib.sha256(seed).hexdigest()[:32]}"
    return TaskRecord(
        id=child_id, tenant=parent.tenant, session_id=session or child_id, input=task,
        spec=AgentSpec(agent=agent_of(job.call.name)), parent_id=parent.id,
        ancestors=[parent.id, *parent.ancestors],
    )  # fmt: skip


def _refusal(call: ToolCall, problem: str) -> AgentMessage:
    ret = ActionReturn(type=call.name, state=ActionStatusCode.ARGS_ERROR,
                       errmsg=f"the agent could not be asked: {problem}")  # fmt: skip
    return AgentMessage.tool_result(call, ret)
