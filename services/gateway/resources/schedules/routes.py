"""/v1/schedules: a tenant's cron schedules, each submitting a task at its run times (run by
Celery beat's tick: shared/taskyard/runtime/schedules/runner.py)."""

from __future__ import annotations

import re
import time
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Response, status

from services.gateway.deps import SettingsDep, StoreDep, TenantDep
from services.gateway.errors import issue, refused, responses
from services.gateway.json_route import JSONRoute
from services.gateway.resources.schedules.models import (
    ScheduleList,
    SchedulePublic,
    ScheduleRunList,
    ScheduleRunPublic,
)
from taskyard.runtime.schedules import Schedule, ScheduleRequest, next_run, parse_cron
from taskyard.runtime.store import TaskStore
from taskyard.runtime.store import schedules as stored
from taskyard.runtime.submission import (
    SubmissionRefused,
    check_offered,
    check_webhook,
    task_deadline,
)

router = APIRouter(prefix="/v1/schedules", tags=["schedules"], route_class=JSONRoute)

_ID = re.compile(r"sch_[0-9a-f]{32}")
_NOT_FOUND = "no such schedule"


@router.post(
    "", status_code=status.HTTP_201_CREATED, response_model=SchedulePublic,
    responses=responses(
        401, 409, 413, 422, why={409: "The tenant has as many schedules as allowed."}
    ),
)  # fmt: skip
async def create_schedule(
    body: ScheduleRequest, tenant: TenantDep, store: StoreDep, settings: SettingsDep
) -> SchedulePublic:
    """Schedule a task: at each run time of `cron` (UTC), the task is submitted as yours, as
    `POST /v1/tasks` would (the same checks, limits and `if_session_busy`)."""
    now = time.time()
    try:
        cron = parse_cron(body.cron, settings.schedule_min_interval_s, now)
    except ValueError as exc:
        raise HTTPException(422, detail=[issue(["body", "cron"], str(exc))]) from exc
    try:
        check_offered(body.task.agent)
        task_deadline(body.task.agent, tenant, settings)
        await check_webhook(body.task.webhook, settings)
    except SubmissionRefused as exc:
        raise refused(exc, "task") from exc
    first = next_run(cron, now)
    schedule = Schedule(tenant=tenant, name=body.name, cron=cron, missed=body.missed,
                        task=body.task, created_at=now, next_run_at=first)  # fmt: skip
    if not await stored.create(store, schedule, settings.schedules_max_per_tenant):
        most = settings.schedules_max_per_tenant
        detail = f"this tenant has {most} schedules, the most allowed: delete one first"
        raise HTTPException(status.HTTP_409_CONFLICT, detail=detail)
    return SchedulePublic.of(schedule)


@router.get("", response_model=ScheduleList, responses=responses(401))
async def list_schedules(tenant: TenantDep, store: StoreDep) -> ScheduleList:
    """Your schedules, newest first."""
    found = await stored.list_schedules(store, tenant)
    return ScheduleList(schedules=[SchedulePublic.of(s) for s in found])


@router.get("/{schedule_id}", response_model=SchedulePublic, responses=responses(401, 404))
async def get_schedule(schedule_id: str, tenant: TenantDep, store: StoreDep) -> SchedulePublic:
    """One of your schedules (another tenant's is a 404, as an unknown id)."""
    return SchedulePublic.of(await _owned(store, tenant, schedule_id))


@router.get(
    "/{schedule_id}/runs", response_model=ScheduleRunList, responses=responses(401, 404, 422)
)
async def list_runs(
    schedule_id: str,
    tenant: TenantDep,
    store: StoreDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> ScheduleRunList:
    """The schedule's latest runs, newest first: each the task it made (and its status now),
    or why it made none (skipped as missed, its session busy, refused)."""
    await _owned(store, tenant, schedule_id)
    found = await stored.runs(store, schedule_id, limit)
    tasks = await store.get_many([r.task_id for r in found if r.task_id])
    by_id = {t.id: t for t in tasks if t is not None}
    runs = [ScheduleRunPublic.of(r, by_id.get(r.task_id or "")) for r in found]
    return ScheduleRunList(runs=runs)


@router.delete(
    "/{schedule_id}", status_code=status.HTTP_204_NO_CONTENT, responses=responses(401, 404)
)
async def delete_schedule(schedule_id: str, tenant: TenantDep, store: StoreDep) -> Response:
    """Stop the schedule and forget its runs; the tasks it made stay."""
    if not (_ID.fullmatch(schedule_id) and await stored.delete(store, tenant, schedule_id)):
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=_NOT_FOUND)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


async def _owned(store: TaskStore, tenant: str, schedule_id: str) -> Schedule:
    found = await stored.get(store, tenant, schedule_id) if _ID.fullmatch(schedule_id) else None
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=_NOT_FOUND)
    return found
