"""The tick: Celery beat's job that submits the tasks of the schedules that came due.

Each due schedule is decided (`cron.decide`: run, or skip what was missed), its task submitted
as its tenant's like any other (the same checks, limits and busy-session policy), then the
schedule moved past that run time by compare-and-set. The submission's idempotency key is the
schedule and run time, so a tick that dies between the two, or two ticks at once, make the
task once: the next tick finds it and records it.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable

from celery import Celery

from taskyard.plumbing.settings import AgentWorkerSettings
from taskyard.runtime.schedules.cron import Decision, decide
from taskyard.runtime.schedules.spec import Schedule, ScheduleRun
from taskyard.runtime.store import TaskStore
from taskyard.runtime.store import schedules as stored
from taskyard.runtime.submission import SubmissionRefused, check_offered, submit

__all__ = ["ScheduleRunner"]

log = logging.getLogger("taskyard.schedules")
_BATCH = 100  # schedules acted on at once


class ScheduleRunner:
    """Runs what is due at each `tick`; `clock` is injectable (tests move time by hand)."""

    def __init__(
        self,
        store: TaskStore,
        celery: Celery,
        settings: AgentWorkerSettings,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.celery = celery
        self.settings = settings
        self.clock = clock

    async def tick(self) -> list[ScheduleRun]:
        """Act on every schedule due now, a batch at a time, each batch's concurrently; the
        runs recorded (none for those another tick took meanwhile). Lateness is measured
        from the tick's start, so a backlog worked through here is not counted as missed."""
        now = self.clock()
        done: list[ScheduleRun] = []
        while batch := await stored.due(self.store, now, _BATCH):
            runs = await asyncio.gather(*(self._guarded(schedule, now) for schedule in batch))
            made = [run for run in runs if run is not None]
            if not made:
                break  # another tick took them all: it works through the rest
            done += made
        return done

    async def _guarded(self, schedule: Schedule, now: float) -> ScheduleRun | None:
        """One schedule's run; a failure is logged and left for the next tick (the run's
        idempotency key keeps a retry from submitting twice), never stopping the others."""
        try:
            return await self._one(schedule, now)
        except Exception:
            log.exception("schedule %s: the run failed; the next tick tries again", schedule.id)
            return None

    async def _one(self, schedule: Schedule, now: float) -> ScheduleRun | None:
        decision = decide(schedule.cron, schedule.next_run_at, now,
                          self.settings.schedule_grace_s, schedule.missed)  # fmt: skip
        run = await self._act(schedule, decision, now)
        kept = self.settings.schedule_runs_kept
        if not await stored.advance(self.store, schedule, decision.next_at, run, kept):
            return None
        log.info("schedule %s at %.0f: %s %s", schedule.id, run.fire_at, run.outcome,
                 run.task_id or run.reason or "")  # fmt: skip
        return run

    async def _act(self, schedule: Schedule, decision: Decision, now: float) -> ScheduleRun:
        """Submit the run's task, or say why there is none."""
        run = ScheduleRun(fire_at=decision.fire_at, at=now, outcome="skipped",
                          late=decision.late, missed=decision.missed)  # fmt: skip
        if not decision.run:
            return run
        unrun = run.model_copy(update={"missed": decision.missed + 1})
        try:
            task_id, busy = await self._submit(schedule, decision.fire_at)
        except SubmissionRefused as exc:
            return unrun.model_copy(update={"outcome": "refused", "reason": exc.reason})
        if busy is not None:
            reason = f"session {schedule.task.session_id} is running task {busy}"
            return unrun.model_copy(update={"outcome": "busy", "reason": reason})
        return run.model_copy(update={"outcome": "submitted", "task_id": task_id})

    async def _submit(self, schedule: Schedule, fire_at: float) -> tuple[str, str | None]:
        """The task made (or made before, by a tick that died), or the task keeping its
        session busy."""
        request = schedule.task
        check_offered(request.agent)
        record = request.record(schedule.tenant, request.session_id or uuid.uuid4().hex)
        key = f"schedule-{schedule.id}-{fire_at:.3f}"
        created = await submit(self.store, self.celery, self.settings, record,
                               request.busy_policy(), idempotency_key=key)  # fmt: skip
        if created.outcome == "busy":
            return "", created.task_id
        return created.task_id, None
