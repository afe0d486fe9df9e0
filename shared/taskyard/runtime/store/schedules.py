"""Schedules in Redis: each a hash (`keys.schedule`), indexed by tenant and, for the tick, by
its next run time (`keys.SCHEDULES_DUE`); its latest runs a capped list. Creating one checks
the tenant's cap and moving one past a run time is compare-and-set, each one Lua script."""

from __future__ import annotations

import orjson

from taskyard.plumbing import keys
from taskyard.runtime.schedules.spec import Schedule, ScheduleRun
from taskyard.runtime.store import redis_replies
from taskyard.runtime.store.base import ScriptedStore
from taskyard.runtime.store.documents import AdvanceScheduleDoc, CreateScheduleDoc
from taskyard.runtime.store.script_keys import AdvanceScheduleKeys, CreateScheduleKeys

__all__ = ["advance", "create", "delete", "due", "get", "list_schedules", "runs"]


def _ts(at: float) -> str:
    return str(float(at))  # as `Schedule.to_redis` writes it, so the compare matches


async def create(store: ScriptedStore, schedule: Schedule, max_per_tenant: int) -> bool:
    """Store it; False if its tenant has `max_per_tenant` schedules already."""
    keys_ = CreateScheduleKeys(keys.schedule(schedule.id), keys.tenant_schedules(schedule.tenant),
                               keys.SCHEDULES_DUE)  # fmt: skip
    doc = CreateScheduleDoc(
        schedule_id=schedule.id, created_at=_ts(schedule.created_at),
        next_run_at=_ts(schedule.next_run_at), max_per_tenant=max_per_tenant,
        fields=schedule.to_redis(),
    )  # fmt: skip
    return bool(await store.script("schedules/create_schedule", keys_, doc))


async def get(store: ScriptedStore, tenant: str, schedule_id: str) -> Schedule | None:
    """The tenant's schedule; None if there is none of that id, or it is another tenant's."""
    found = await _load(store, schedule_id)
    return found if found is not None and found.tenant == tenant else None


async def _load(store: ScriptedStore, schedule_id: str) -> Schedule | None:
    fields = redis_replies.fields(await store.r.hgetall(keys.schedule(schedule_id)))
    return Schedule.from_redis(fields) if fields else None


async def list_schedules(store: ScriptedStore, tenant: str) -> list[Schedule]:
    """The tenant's schedules, newest first (a tenant has at most a settings' cap of them)."""
    ids = redis_replies.members(await store.r.zrevrange(keys.tenant_schedules(tenant), 0, -1))
    return [schedule for schedule in await _load_many(store, ids) if schedule is not None]


async def delete(store: ScriptedStore, tenant: str, schedule_id: str) -> bool:
    """Forget the tenant's schedule and its runs (the tasks it made stay); False if it has
    none of that id."""
    if await get(store, tenant, schedule_id) is None:
        return False
    async with store.r.pipeline(transaction=True) as pipe:
        pipe.delete(keys.schedule(schedule_id), keys.schedule_runs(schedule_id))
        pipe.zrem(keys.tenant_schedules(tenant), schedule_id)
        pipe.zrem(keys.SCHEDULES_DUE, schedule_id)
        await pipe.execute()
    return True


async def due(store: ScriptedStore, now: float, limit: int) -> list[Schedule]:
    """Schedules whose next run time has come, the earliest first (an id whose schedule is
    gone, deleted meanwhile, leaves the index)."""
    ids = redis_replies.members(
        await store.r.zrangebyscore(keys.SCHEDULES_DUE, "-inf", now, 0, limit)
    )
    found = await _load_many(store, ids)
    if gone := [i for i, schedule in zip(ids, found, strict=True) if schedule is None]:
        await store.r.zrem(keys.SCHEDULES_DUE, *gone)
    return [schedule for schedule in found if schedule is not None]


async def _load_many(store: ScriptedStore, ids: list[str]) -> list[Schedule | None]:
    """Several schedules in one round trip, in order (None where one is gone)."""
    async with store.r.pipeline(transaction=False) as pipe:
        for schedule_id in ids:
            pipe.hgetall(keys.schedule(schedule_id))
        found = [redis_replies.fields(fields) for fields in await pipe.execute()]
    return [Schedule.from_redis(fields) if fields else None for fields in found]


async def advance(
    store: ScriptedStore, schedule: Schedule, next_at: float, run: ScheduleRun, kept: int
) -> bool:
    """Move `schedule` (as the tick read it) past `run`, recording it; False if another tick
    did so first or the schedule is gone."""
    keys_ = AdvanceScheduleKeys(keys.schedule(schedule.id), keys.schedule_runs(schedule.id),
                                keys.SCHEDULES_DUE)  # fmt: skip
    ran = run.task_id is not None
    doc = AdvanceScheduleDoc(
        schedule_id=schedule.id, read_next_run_at=_ts(schedule.next_run_at),
        next_run_at=_ts(next_at), last_run_at=_ts(run.at) if ran else "", runs=int(ran),
        missed=run.missed, run=run.model_dump_json(), kept=kept,
    )  # fmt: skip
    return bool(await store.script("schedules/advance_schedule", keys_, doc))


async def runs(store: ScriptedStore, schedule_id: str, limit: int) -> list[ScheduleRun]:
    """The schedule's latest runs, newest first."""
    found = redis_replies.members(
        await store.r.lrange(keys.schedule_runs(schedule_id), 0, limit - 1)
    )
    return [ScheduleRun.model_validate(orjson.loads(entry)) for entry in found]
