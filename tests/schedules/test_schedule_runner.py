"""The schedules' tick on a real Redis, the clock moved by hand: each run time submits one
task as the tenant's, exactly once however many ticks see it; runs missed while the
scheduler was down (no tick for an hour) follow the schedule's `missed` policy."""

from __future__ import annotations

import pytest
import redis

from taskyard.plumbing import keys
from taskyard.plumbing.celery_app import make_celery
from taskyard.plumbing.settings import AgentWorkerSettings
from taskyard.runtime.schedules import Schedule, ScheduleRequest, next_run
from taskyard.runtime.schedules.runner import ScheduleRunner
from taskyard.runtime.store import TaskStore
from taskyard.runtime.store import schedules as stored

T0 = 1_800_000_000.0  # a multiple of five minutes
EVERY_5_MIN = "*/5 * * * *"


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def settings(redis_server: str, redis_client: redis.Redis) -> AgentWorkerSettings:
    redis.Redis.from_url(f"{redis_server}/1").flushdb()
    return AgentWorkerSettings(redis_url=f"{redis_server}/0", broker_url=f"{redis_server}/1")


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def runner(store: TaskStore, settings: AgentWorkerSettings, clock: Clock) -> ScheduleRunner:
    return ScheduleRunner(store, make_celery(settings), settings, clock)


async def _schedule(store: TaskStore, missed: str = "run_once", **task: object) -> Schedule:
    request = ScheduleRequest.model_validate(
        {"cron": EVERY_5_MIN, "missed": missed, "task": {"input": "report", **task}}
    )
    first = next_run(request.cron, T0)
    schedule = Schedule(tenant="acme", cron=request.cron, missed=request.missed,
                        task=request.task, created_at=T0, next_run_at=first)  # fmt: skip
    assert await stored.create(store, schedule, max_per_tenant=1000)
    return schedule


async def test_each_run_time_submits_one_task_as_the_tenants(
    store: TaskStore, runner: ScheduleRunner, clock: Clock
) -> None:
    schedule = await _schedule(store)
    assert await runner.tick() == []  # not due yet
    clock.now = T0 + 300 + 2
    first, again = await runner.tick(), await runner.tick()
    assert [r.outcome for r in first] == ["submitted"] and again == []
    task = await store.get(first[0].task_id or "")
    assert task is not None and task.tenant == "acme" and task.input == "report"
    clock.now = T0 + 600 + 1
    (second,) = await runner.tick()
    other = await store.get(second.task_id or "")
    assert other is not None and other.session_id != task.session_id  # a fresh one each run
    found = await stored.get(store, "acme", schedule.id)
    assert found is not None and found.runs == 2 and found.next_run_at == T0 + 900
    listed = await stored.runs(store, schedule.id, 10)
    assert [r.task_id for r in listed] == [second.task_id, first[0].task_id]


async def test_runs_in_a_named_session_wait_their_turn_there(
    store: TaskStore, runner: ScheduleRunner, clock: Clock
) -> None:
    await _schedule(store, session_id="daily")
    clock.now = T0 + 301
    (first,) = await runner.tick()
    clock.now = T0 + 601
    (second,) = await runner.tick()  # the first still runs: the second is queued behind it
    assert await store.r.get(keys.session_lock("acme", "daily")) == first.task_id
    assert await store.r.lrange(keys.session_waiting("acme", "daily"), 0, -1) == [second.task_id]


async def test_a_busy_session_refusing_the_run_is_recorded_not_lost_silently(
    store: TaskStore, runner: ScheduleRunner, clock: Clock
) -> None:
    schedule = await _schedule(store, session_id="daily", if_session_busy="reject")
    clock.now = T0 + 301
    (first,) = await runner.tick()
    clock.now = T0 + 601
    (refused,) = await runner.tick()
    assert refused.outcome == "busy" and refused.task_id is None
    assert refused.reason == f"session daily is running task {first.task_id}"
    found = await stored.get(store, "acme", schedule.id)
    assert found is not None and (found.runs, found.missed_runs) == (1, 1)


@pytest.mark.parametrize(("missed", "runs"), [("run_once", 1), ("skip", 0)])
async def test_runs_missed_while_beat_was_down_follow_the_policy(
    store: TaskStore, runner: ScheduleRunner, clock: Clock, missed: str, runs: int
) -> None:
    schedule = await _schedule(store, missed=missed)
    clock.now = T0 + 301
    assert len(await runner.tick()) == 1
    clock.now = T0 + 3600 + 100  # beat down for an hour: 11 run times (T0+600 to
    # T0+3600) passed, none ticked
    (late,) = await runner.tick()
    assert late.late and late.fire_at == T0 + 3600
    assert late.outcome == ("submitted" if runs else "skipped")
    assert late.missed == 11 - runs
    assert await runner.tick() == []  # no burst of catching up
    found = await stored.get(store, "acme", schedule.id)
    assert found is not None and found.runs == 1 + runs and found.missed_runs == 11 - runs
    assert found.next_run_at == T0 + 3900  # on time again from there
    clock.now = T0 + 3901
    (back,) = await runner.tick()
    assert back.outcome == "submitted" and not back.late


async def test_a_schedule_whose_run_fails_holds_up_no_other(
    store: TaskStore, runner: ScheduleRunner, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken, fine = await _schedule(store), await _schedule(store)
    real = stored.advance

    async def fails_for_one(store_: TaskStore, schedule: Schedule, *args: object) -> bool:
        if schedule.id == broken.id:
            raise ConnectionError("lost the connection")
        return await real(store_, schedule, *args)

    monkeypatch.setattr(stored, "advance", fails_for_one)
    clock.now = T0 + 301
    assert [len(await stored.runs(store, s.id, 10)) for s in (broken, fine)] == [0, 0]
    (run,) = await runner.tick()
    assert (await stored.runs(store, fine.id, 10))[0].task_id == run.task_id
    monkeypatch.undo()
    (retried,) = await runner.tick()  # the broken one's run, once: its task made before
    assert (await stored.runs(store, broken.id, 10))[0].task_id == retried.task_id
    assert await store.r.zcard(keys.tenant_tasks("acme")) == 2


async def test_a_tick_that_died_after_submitting_does_not_submit_twice(
    store: TaskStore, runner: ScheduleRunner, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    schedule = await _schedule(store)
    clock.now = T0 + 301

    async def dies(*args: object, **kwargs: object) -> bool:
        raise ConnectionError("the worker died here")

    monkeypatch.setattr(stored, "advance", dies)
    assert await runner.tick() == []  # the run failed after its task was made
    monkeypatch.undo()
    (run,) = await runner.tick()  # the same run time, again: the task made before is found
    assert await store.r.zcard(keys.tenant_tasks("acme")) == 1
    assert (await stored.runs(store, schedule.id, 10))[0].task_id == run.task_id


async def test_a_deleted_schedule_runs_no_more(
    store: TaskStore, runner: ScheduleRunner, clock: Clock
) -> None:
    schedule = await _schedule(store)
    assert await stored.get(store, "other-tenant", schedule.id) is None
    assert not await stored.delete(store, "other-tenant", schedule.id)
    assert await stored.delete(store, "acme", schedule.id)
    clock.now = T0 + 301
    assert await runner.tick() == []
    assert await stored.list_schedules(store, "acme") == []


async def test_a_tenant_has_at_most_its_cap_of_schedules(store: TaskStore) -> None:
    task = ScheduleRequest.model_validate({"cron": "@daily", "task": {"input": "x"}}).task
    made = Schedule(tenant="acme", cron=EVERY_5_MIN, missed="skip", task=task,
                    created_at=T0, next_run_at=T0 + 300)  # fmt: skip
    assert await stored.create(store, made, max_per_tenant=1)
    assert not await stored.create(store, made.model_copy(update={"id": "sch_2"}), 1)
    assert [s.id for s in await stored.list_schedules(store, "acme")] == [made.id]


async def test_a_backlog_past_one_batch_runs_in_one_tick_none_counted_late(
    store: TaskStore, runner: ScheduleRunner, clock: Clock
) -> None:
    for _ in range(250):  # more than a batch, all due at once (every morning at nine, say)
        await _schedule(store, missed="skip")
    await store.r.zadd(keys.SCHEDULES_DUE, {"sch_gone": T0})  # a schedule deleted meanwhile
    clock.now = T0 + 301
    runs = await runner.tick()
    assert len(runs) == 250 and all(r.outcome == "submitted" and not r.late for r in runs)
    assert await store.r.zcard(keys.tenant_tasks("acme")) == 250
    assert await store.r.zscore(keys.SCHEDULES_DUE, "sch_gone") is None
