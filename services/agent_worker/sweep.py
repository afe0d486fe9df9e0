"""The sweep: Celery beat's periodic job that keeps accepted tasks moving.

kombu's Redis transport pops a job before it records it as unacked, so a worker killed in
between loses that job for good (celery/celery#4354, #7950), and nothing else would ever
move its task again. Every live task is indexed by when the sweep is to look at it: once it
stood still for its `stall_s`, or at its deadline if that comes first (the store's scripts keep
the index as the task moves). The sweep re-sends what a stalled task is waiting on. Steps and
tool calls are idempotent, so re-sending is always safe: at worst a duplicate does nothing. A
task past its deadline it ends (`timed_out`), so a task whose tool never comes back does not
wait for its next step to notice. The same sweep denies calls held
for approval that nobody decided on within the policy's timeout, and sends a delivery job
for each task whose webhook events are due (a retry's backoff is over, or a job was lost),
and moves the jobs waiting on the own queue of a tool worker that is gone (its heartbeat
lapsed: killed, or its host lost) back to their pool queues, where another worker takes them
and tells the model the session's interpreter state was lost.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from celery import Celery

from services.agent_worker.step import StepRunner
from taskyard.agentkit.schema import ToolCall
from taskyard.plumbing import keys
from taskyard.plumbing.settings import AgentWorkerSettings
from taskyard.runtime.approvals import Decision, decide
from taskyard.runtime.jobs import FILES_TOOL, AgentStepJob, Job, WebhookJob, job_for_call
from taskyard.runtime.store import TaskStore
from taskyard.runtime.store.sandboxes import SandboxDirectory
from taskyard.runtime.task import TaskRecord, TaskStatus
from taskyard.runtime.webhooks import Deliverer

__all__ = ["Sweeper"]

log = logging.getLogger("taskyard.sweep")
_LOCK_S = 120.0  # longer than any sweep takes, even of a backlog under chaos


class Sweeper:
    """One sweep at a time (a Redis lock); returns the jobs to send."""

    def __init__(
        self,
        store: TaskStore,
        settings: AgentWorkerSettings,
        runner: StepRunner,
        celery: Celery,
        webhooks: Deliverer,
    ) -> None:
        self.store = store
        self.settings = settings
        self.runner = runner
        self.celery = celery
        self.webhooks = webhooks

    async def run(self) -> list[Job]:
        # Sweeps never overlap (two would re-send the same tasks): the lock is held until the
        # sweep is done, and lapses on its own only should its worker die mid-sweep.
        hold_s = max(_LOCK_S, self.settings.sweep_interval_s)
        if not await self.store.try_lock(keys.SWEEP_LOCK, hold_s):
            return []
        try:
            return await self._sweep()
        finally:
            await self.store.r.delete(keys.SWEEP_LOCK)

    async def _sweep(self) -> list[Job]:
        now = time.time()
        jobs: list[Job] = []
        for held in await self.store.undecided(now):
            await self._deny(*held)
        for task_id in await self.store.due(now):
            jobs += await self._look_at(task_id, now)
        jobs += [WebhookJob(task_id=task_id) for task_id in await self.webhooks.due(now)]
        await self._redrive_gone_tool_workers()
        return jobs

    async def _redrive_gone_tool_workers(self) -> None:
        directory = SandboxDirectory(self.store)
        for node in await directory.gone():
            moved, left = await directory.redrive(node, keys.tool_queue(FILES_TOOL))
            if moved:
                log.warning("tool worker %s is gone: %d jobs of its queue moved to the pool "
                            "(%d left for the next sweep)", node, moved, left)  # fmt: skip

    async def _look_at(self, task_id: str, now: float) -> list[Job]:
        """A task due: ended (forgotten), past its deadline (timed out) or stalled (what it
        waits on, sent again)."""
        record = await self.store.get(task_id)
        if record is None or record.terminal:
            await self.store.forget(task_id)
            if record is not None:
                await self._heal(record)
            return []
        deadline_s = record.deadline(self.settings.task_deadline_s)
        if now >= record.created_at + deadline_s:
            reason = f"deadline of {deadline_s:.15g}s passed"
            extra = {"task_id": task_id, "session_id": record.session_id}
            log.warning("task timed out", extra=extra)
            await self.runner.end(record, TaskStatus.TIMED_OUT, reason)
            return []
        await self.store.look_again(task_id)
        return await self._redrive(record)

    async def _deny(self, task_id: str, step: int, call_id: str) -> None:
        record = await self.store.get(task_id)
        if record is None or record.terminal or record.step != step + 1:
            await self.store.undecided_gone(task_id, step, call_id)
            return
        timeout = record.spec.approval.timeout_s if record.spec.approval else None
        reason = f"no decision within {timeout:g} s" if timeout else "no decision in time"
        denied = Decision(decision="deny", reason=reason)
        await decide(self.store, self.celery, record, call_id, denied)

    async def _redrive(self, record: TaskRecord) -> list[Job]:
        jobs = await self._waited_on(record)
        if jobs:
            extra = {"task_id": record.id, "session_id": record.session_id, "step": record.step}
            log.warning("re-driving a task that stood still (%s)", record.status, extra=extra)
        return jobs

    async def _waited_on(self, record: TaskRecord) -> list[Job]:
        """What the task waits for, sent again."""
        if record.status == TaskStatus.QUEUED:
            holder = await self.store.session_holder(record.tenant, record.session_id)
            if holder == record.id:
                return [AgentStepJob.first(record)]
            await self._heal(record)
        if record.status == TaskStatus.RUNNING:
            return [AgentStepJob.again(record)]
        if record.status in (TaskStatus.WAITING_TOOLS, TaskStatus.WAITING_APPROVAL):
            return await self._missing_results(record)
        return []

    async def _missing_results(self, record: TaskRecord) -> list[Job]:
        """The step's calls without a result, as jobs (as approved; those still waiting for
        a person stay held); the next step when every result is in."""
        step = record.step - 1
        done = await self.store.tool_results(record.id, step, record.pending_calls)
        answered = {m.tool_call_id for m in done}
        missing = [c for c in record.pending_calls if c.id not in answered]
        if not missing:  # every result is in: the next step's job was lost
            return [AgentStepJob.again(record)]
        held = await self.store.approvals(record.id, step)
        calls = [_as_approved(c, held.get(c.id)) for c in missing]
        return [job_for_call(record.id, step, record.tenant, record.session_id, c, record.spec)
                for c in calls if c]  # fmt: skip

    async def _heal(self, record: TaskRecord) -> None:
        """Give a session nobody live holds to its next waiting task (the heal pushes that
        task's first step)."""
        await self.store.heal_session(record.tenant, record.session_id)


def _as_approved(call: ToolCall, held: dict[str, Any] | None) -> ToolCall | None:
    """The call to run: as the model made it, as a person approved it, or none yet."""
    if held is None:
        return call
    return ToolCall.model_validate(held["call"]) if held["state"] == "approved" else None
