"""One agent step: begin it (one round trip: the task, its inputs, the session's new
messages), call the session's warm agent on the inputs while its text streams to the event
stream, and commit exactly once (one round trip) together with every job that follows from
it: its tool jobs and, when it ends the task, the first step of the session's next task.

The step runs on the worker's event loop and leaves nothing for the caller to send.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import replace

from celery import Celery

from services.agent_worker.compaction import Compactor, PromptSize
from services.agent_worker.delta_buffer import DeltaBuffer
from services.agent_worker.errors import AgentWorkerError
from services.agent_worker.live_agents import LiveAgents, LiveSession
from services.agent_worker.mcp_tools import McpTools, McpToolsUnavailable
from services.agent_worker.metrics import record_usage
from services.agent_worker.model_calls import StepCalls, open_step_calls
from taskyard.agentkit.schema import AgentMessage, AgentStatusCode, ToolCall
from taskyard.plumbing.settings import AgentWorkerSettings
from taskyard.runtime.cancel import CancelWatch, cancel_children
from taskyard.runtime.events import EventKind
from taskyard.runtime.jobs import AgentStepJob, Job, envelope, job_for_call
from taskyard.runtime.store import StepCommit, StepStart, TaskStore
from taskyard.runtime.task import TaskRecord, TaskStatus

__all__ = ["StepRunner"]

log = logging.getLogger("taskyard.agent_worker")


class StepCancelled(AgentWorkerError):
    """The task was cancelled while its step ran; the gateway already passed the session on."""


class StepRunner:
    """The agent step, with its dependencies handed in (so tests run it on their own loop)."""

    def __init__(
        self,
        store: TaskStore,
        settings: AgentWorkerSettings,
        agents: LiveAgents,
        cancels: CancelWatch,
        celery: Celery,
        compactor: Compactor | None = None,
        mcp: McpTools | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.agents = agents
        self.cancels = cancels
        self.celery = celery  # builds the envelopes of the jobs a commit pushes
        self.compactor = compactor or Compactor(store, settings)
        self.mcp = mcp or McpTools(store, settings, celery)

    async def run(self, job: AgentStepJob) -> None:
        """Run the step `job` names (its writes push the jobs that follow)."""
        offsets, epoch = self.agents.offsets(job.tenant, job.session_id)
        start = await self.store.begin_step(
            job.task_id, job.step, job.tenant, job.session_id, offsets, epoch
        )
        if start is None:
            return
        if not start.current:
            return await self._not_current(start.record)
        if (limit := self._limit_reached(start.record)) is not None:
            return await self.end(start.record, *limit)
        try:
            mcp_tools = await self.mcp.schemas(start.record)
        except McpToolsUnavailable as exc:
            return await self.end(start.record, TaskStatus.FAILED, str(exc))
        live = await self.agents.acquire(start, self.store, mcp_tools)
        committed: dict[str, list[AgentMessage]] | None = None
        spent = open_step_calls(start.record)  # every model call of the step, and its tokens
        try:
            size = await self.compactor.fit(live, start)
            if (over := _over_budget(start.record, size)) is not None:
                return await self.end(start.record, TaskStatus.FAILED, over)
            reply, unsent = await self._call(live, start)
            committed = await self._commit(start, live, reply, unsent, spent)
        except StepCancelled:
            return
        finally:
            self.agents.release(live, committed)

    async def end(self, record: TaskRecord, status: TaskStatus, reason: str) -> None:
        """End a task without a result (limits, errors) with the reason, and the child tasks
        it started; the end pushes the first step of its session's next task, if one waits."""
        ended, _ = await self.store.end(record, status, error=reason)
        if ended:
            await cancel_children(self.store, self.celery, record.id)

    async def fail(self, job: AgentStepJob, reason: str) -> None:
        """End the job's task as failed, unless it ended already."""
        record = await self.store.get(job.task_id)
        if record is not None and not record.terminal:
            await self.end(record, TaskStatus.FAILED, reason)

    # -- the call ----------------------------------------------------------------------------

    async def _call(self, live: LiveSession, start: StepStart) -> tuple[AgentMessage, str]:
        """The agent's reply, and its streamed text not published yet."""
        record, task = start.record, asyncio.current_task()
        assert task is not None
        deltas = DeltaBuffer(self.store, record.id, live.agent.name, self.settings.token_flush_s)
        cancelled = False

        def on_cancel() -> None:
            nonlocal cancelled
            cancelled = True
            task.cancel()

        try:
            with self.cancels.watch(record.id, on_cancel):
                stream = live.agent.stream(
                    *start.inputs(), session_id=record.session_id, task_id=record.id
                )
                async with aclosing(stream):
                    reply = await _reply(stream, deltas)
        except (Exception, asyncio.CancelledError):
            if not cancelled:
                raise
        finally:
            if cancelled and task.cancelling():
                task.uncancel()
            unsent = await deltas.close()
        # An agent's own code may turn the cancel into an error of its own, or answer anyway:
        # once the task is cancelled, how the call ended is moot.
        if cancelled:
            raise StepCancelled(record.id)
        return reply, unsent

    async def _commit(
        self, start: StepStart, live: LiveSession, reply: AgentMessage, unsent: str,
        spent: StepCalls,
    ) -> dict[str, list[AgentMessage]] | None:  # fmt: skip
        record, calls = start.record, reply.tool_calls
        new = live.new_messages()
        published = [reply]  # the user's message went out with the task, tool results as they came
        rest = {"delta": unsent, "sender": live.agent.name} if unsent else None
        written = StepCommit(record, TaskStatus.SUCCEEDED, new, published, spent.usage,
                             unsent_text=rest, values=live.new_values())  # fmt: skip
        commit = self._send_or_hold(written, calls) if calls else _answered(written, reply)
        applied, _ = await self.store.commit_step(commit)
        if not applied:
            log.info("step already committed", extra={"task_id": record.id, "step": record.step})
            return None
        record_usage(record.tenant, spent.usage)
        return new

    def _send_or_hold(self, written: StepCommit, calls: list[ToolCall]) -> StepCommit:
        """`written` with the calls going out as tool jobs, but those the spec's approval
        policy names waiting for a person (the task then waits in `waiting_approval`)."""
        record, policy = written.record, written.record.spec.approval
        held = [c for c in calls if policy is not None and policy.needs(c.name)]
        pending = {"pending_calls": [c.model_dump(mode="json") for c in calls]}
        jobs = [envelope(self.celery, _job(record, c)) for c in calls if c not in held]
        if not held or policy is None:
            return replace(written, status=TaskStatus.WAITING_TOOLS, fields=pending, jobs=jobs)
        asked = [{"id": c.id, "tool": c.name, "arguments": c.parameters} for c in held]
        data = {"step": record.step, "calls": asked, "timeout_s": policy.timeout_s}
        return replace(written, status=TaskStatus.WAITING_APPROVAL, fields=pending, jobs=jobs,
                       held=held, approval_timeout_s=policy.timeout_s,
                       events=[(EventKind.APPROVAL_REQUESTED, data)])  # fmt: skip

    # -- steps that are not to run -----------------------------------------------------------

    async def _not_current(self, record: TaskRecord) -> None:
        """A duplicate or stale step does nothing (its commit pushed its jobs already); but an
        ended task may still hold its session (it ended between two steps): pass it on."""
        holder = await self.store.session_holder(record.tenant, record.session_id)
        if record.terminal and holder == record.id:
            await self.store.release_session(record)

    def _limit_reached(self, record: TaskRecord) -> tuple[TaskStatus, str] | None:
        max_steps = record.spec.max_steps or self.settings.default_max_steps
        if record.step >= max_steps:
            return TaskStatus.FAILED, f"max_steps ({max_steps}) reached without a final answer"
        deadline_s = record.deadline(self.settings.task_deadline_s)
        if time.time() - record.created_at > deadline_s:
            return TaskStatus.TIMED_OUT, f"deadline of {deadline_s:.15g}s passed"
        return None


async def _reply(stream: AsyncIterator[AgentMessage], deltas: DeltaBuffer) -> AgentMessage:
    shown, reply = "", None
    async for message in stream:
        reply = message
        if message.stream_state == AgentStatusCode.STREAM_ING:
            text = str(message.content)
            # Streamed messages carry the text so far; the event stream wants what is new.
            if text.startswith(shown) and len(text) > len(shown):
                await deltas.add(text[len(shown) :])
            shown = text
    assert reply is not None  # an agent call always ends with its reply
    return reply


def _over_budget(record: TaskRecord, size: PromptSize) -> str | None:
    """Why the step must not run: it would pass the task's token budget."""
    budget = record.spec.max_tokens_total
    used = record.prompt_tokens + record.completion_tokens
    if budget is None or used + size.tokens <= budget:
        return None
    return (
        f"token budget of {budget} would be passed: {used} used, about {size.tokens} more "
        "for this step's prompt"
    )


def _job(record: TaskRecord, call: ToolCall) -> Job:
    """A call's job: a tool run, or a child task for an agent offered as a tool."""
    return job_for_call(record.id, record.step, record.tenant, record.session_id, call, record.spec)


def _answered(written: StepCommit, reply: AgentMessage) -> StepCommit:
    """`written` as the task's end: the reply is its final answer."""
    result = {"result": _text(reply)}
    return replace(written, status=TaskStatus.SUCCEEDED, fields=result, shown=result)


def _text(message: AgentMessage) -> str:
    return message.content if isinstance(message.content, str) else str(message.content)
