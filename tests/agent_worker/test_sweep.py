"""The sweep on a real Redis: what a task standing still waits on is sent again, sessions
nobody live holds pass on, tasks past their deadline end timed out, busy tasks are left be."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import AsyncIterator

import pytest
import redis

from services.agent_worker.live_agents import LiveAgents
from services.agent_worker.step import StepRunner
from services.agent_worker.sweep import Sweeper
from taskyard.agentkit.agents import build_agent
from taskyard.agentkit.schema import ActionReturn, AgentMessage, ToolCall
from taskyard.agentkit.spec import AgentSpec
from taskyard.plumbing import keys
from taskyard.plumbing.celery_app import make_celery
from taskyard.plumbing.settings import AgentWorkerSettings
from taskyard.runtime.cancel import CancelWatch
from taskyard.runtime.jobs import AgentStepJob, Job, ToolRunJob, WebhookJob, envelope
from taskyard.runtime.store import StepCommit, TaskStore
from taskyard.runtime.submission import submit
from taskyard.runtime.task import TaskRecord, TaskStatus
from taskyard.runtime.webhooks import Deliverer

# Long enough that a task which moved just now is not taken for one standing still, on a
# machine loaded enough to pause this test for tens of milliseconds.
STALL_S = 0.3


@pytest.fixture
async def sweeper(store: TaskStore, redis_server: str) -> AsyncIterator[Sweeper]:
    settings = AgentWorkerSettings(redis_url=f"{redis_server}/0", stall_s=STALL_S,
                                   sweep_interval_s=0.01, task_deadline_s=60)  # fmt: skip
    agents = LiveAgents(lambda spec: build_agent(spec, settings))  # no step runs here
    celery = make_celery(settings)
    runner = StepRunner(store, settings, agents, CancelWatch(store.r), celery)
    webhooks = Deliverer(store, settings)
    yield Sweeper(store, settings, runner, celery, webhooks)
    await webhooks.close()


async def _sweep(sweeper: Sweeper) -> list[Job]:
    await asyncio.sleep(STALL_S * 2)  # everything created so far has stood still long enough
    await sweeper.store.r.delete(keys.SWEEP_LOCK)
    return await sweeper.run()


async def _task(store: TaskStore, session: str = "s", **fields: object) -> TaskRecord:
    record = TaskRecord(tenant="t", session_id=session, input="hi", **fields)
    await store.create(record, deadline_s=60, stall_s=STALL_S)
    return record


async def _queued(sweeper: Sweeper, store: TaskStore) -> TaskRecord:
    """A task queued behind the session's, its first step's job stored with it."""
    record = TaskRecord(tenant="t", session_id="s", input="hi")
    first = envelope(sweeper.celery, AgentStepJob.first(record))
    await store.create(record, first, deadline_s=60, stall_s=STALL_S)
    return record


def _pushed(redis_server: str) -> list[AgentStepJob]:
    """The agent step jobs the store's scripts pushed to the broker, oldest first."""
    broker = redis.Redis.from_url(f"{redis_server}/1")
    raw = [json.loads(m) for m in reversed(broker.lrange(keys.AGENT_QUEUE, 0, -1))]
    broker.delete(keys.AGENT_QUEUE)
    return [AgentStepJob.model_validate(json.loads(base64.b64decode(m["body"]))[0][0]) for m in raw]


def _step(record: TaskRecord, step: int = 0) -> AgentStepJob:
    return AgentStepJob(task_id=record.id, step=step, tenant="t", session_id=record.session_id)


async def _sweep_at(sweeper: Sweeper, record: TaskRecord, after_s: float) -> None:
    """Sweep `after_s` after the task was made."""
    await asyncio.sleep(max(0.0, record.created_at + after_s - time.time()))
    await sweeper.store.r.delete(keys.SWEEP_LOCK)
    await sweeper.run()


async def _timed_out(store: TaskStore, task_id: str, why: str) -> None:
    ended = await store.get(task_id)
    assert ended is not None and ended.status == TaskStatus.TIMED_OUT
    assert ended.error == why


async def test_a_queued_task_whose_first_step_was_lost_is_sent_again(
    sweeper: Sweeper, store: TaskStore
) -> None:
    record = await _task(store)  # its first step's job "vanished" (none was pushed here)
    assert await _sweep(sweeper) == [_step(record)]


async def test_a_running_step_and_missing_tool_calls_are_sent_again(
    sweeper: Sweeper, store: TaskStore
) -> None:
    running = await _task(store, "a")
    start = await store.begin_step(running.id, 0, "t", "a", {"memory": 0})
    assert start is not None and start.began
    waiting = await _task(store, "b")
    calls = [ToolCall(id="c1", name="IPythonInterpreter"), ToolCall(id="c2", name="T")]
    pending = [c.model_dump(mode="json") for c in calls]
    commit = StepCommit(waiting, TaskStatus.WAITING_TOOLS, fields={"pending_calls": pending})
    assert (await store.commit_step(commit))[0]
    await store.put_tool_result(waiting.id, 0, "c1",
                                AgentMessage.tool_result(calls[0], ActionReturn()))  # fmt: skip
    jobs = await _sweep(sweeper)
    assert _step(running) in jobs
    tool_jobs = [j for j in jobs if isinstance(j, ToolRunJob)]
    assert [(j.task_id, j.step, j.call.id) for j in tool_jobs] == [(waiting.id, 0, "c2")]


async def test_a_step_whose_results_are_all_in_is_sent_again(
    sweeper: Sweeper, store: TaskStore
) -> None:
    record = await _task(store)
    call = ToolCall(id="c1", name="T")
    commit = StepCommit(record, TaskStatus.WAITING_TOOLS,
                        fields={"pending_calls": [call.model_dump(mode="json")]})  # fmt: skip
    await store.commit_step(commit)
    await store.put_tool_result(record.id, 0, "c1", AgentMessage.tool_result(call, ActionReturn()))
    assert await _sweep(sweeper) == [_step(record, 1)]  # the advance's job was lost


async def test_a_task_that_moves_is_left_be(sweeper: Sweeper, store: TaskStore) -> None:
    record = await _task(store)
    await asyncio.sleep(STALL_S * 2)
    await store.begin_step(record.id, 0, "t", "s", {"memory": 0})  # it moved just now
    await store.r.delete(keys.SWEEP_LOCK)
    assert await sweeper.run() == []


async def test_a_session_held_by_an_ended_task_passes_on(
    sweeper: Sweeper, store: TaskStore, redis_client: redis.Redis, redis_server: str
) -> None:
    first = await _task(store)
    second = await _queued(sweeper, store)
    _pushed(redis_server)
    # Ended without passing the session on, as a crash between the two writes could leave it.
    redis_client.hset(keys.task(first.id), "status", "failed")
    redis_client.zrem(keys.LIVE_TASKS, first.id)
    assert await _sweep(sweeper) == []  # nothing to send: the heal pushed the first step
    assert _pushed(redis_server) == [_step(second)]
    assert await store.session_holder("t", "s") == second.id


async def test_a_task_past_its_deadline_times_out_and_passes_its_session_on(
    sweeper: Sweeper, store: TaskStore, redis_client: redis.Redis, redis_server: str
) -> None:
    late = await _task(store)
    following = await _queued(sweeper, store)
    _pushed(redis_server)
    redis_client.hset(keys.task(late.id), "created_at", "1.0")  # its deadline long past
    redis_client.zadd(keys.LIVE_TASKS, {late.id: 61.0})
    await _sweep(sweeper)
    await _timed_out(store, late.id, "deadline of 60s passed")
    assert _pushed(redis_server) == [_step(following)]  # pushed by the timing out
    assert redis_client.zscore(keys.LIVE_TASKS, late.id) is None


async def test_a_task_times_out_at_its_own_deadline(sweeper: Sweeper, store: TaskStore) -> None:
    spec = AgentSpec(deadline_s=2)  # the sweeper's TASK_DEADLINE_S is 60
    record = TaskRecord(tenant="t", session_id="own", input="hi", spec=spec)
    await submit(store, sweeper.celery, sweeper.settings, record, "enqueue")
    await _sweep(sweeper)  # some 0.6 s in: within it
    live = await store.get(record.id)
    assert live is not None and live.status == TaskStatus.QUEUED and live.deadline_s == 2
    await _sweep_at(sweeper, record, 2.1)
    await _timed_out(store, record.id, "deadline of 2s passed")


async def test_a_task_that_keeps_moving_still_times_out_at_its_deadline(
    sweeper: Sweeper, store: TaskStore
) -> None:
    record = TaskRecord(tenant="t", session_id="busy", input="hi")
    await store.create(record, deadline_s=1.5, stall_s=300)  # it would stall only at 300 s
    await store.begin_step(record.id, 0, "t", "busy", {"memory": 0})
    assert await _sweep(sweeper) == []  # it moved just now, and its deadline is ahead
    await asyncio.sleep(max(0.0, record.created_at + 1.0 - time.time()))  # then it moves again
    call = ToolCall(id="c1", name="T").model_dump(mode="json")
    running = await store.get(record.id)
    assert running is not None
    commit = StepCommit(running, TaskStatus.WAITING_TOOLS, fields={"pending_calls": [call]})
    assert (await store.commit_step(commit))[0]  # it moved again
    await _sweep_at(sweeper, record, 1.6)
    await _timed_out(store, record.id, "deadline of 1.5s passed")


async def test_a_re_driven_task_is_looked_at_again_after_its_stall_not_at_every_sweep(
    sweeper: Sweeper, store: TaskStore
) -> None:
    record = await _task(store)
    assert await _sweep(sweeper) == [_step(record)]  # its first step's job was lost
    await sweeper.store.r.delete(keys.SWEEP_LOCK)
    assert await sweeper.run() == []  # sent again just now: not again at once
    assert await _sweep(sweeper) == [_step(record)]  # stood still again since


def test_the_sweep_is_on_celery_beats_schedule() -> None:
    from services.agent_worker.worker import app

    entry = app.conf.beat_schedule["sweep"]
    assert entry["task"] == keys.SWEEP_TASK
    assert entry["options"]["queue"] == keys.AGENT_QUEUE


async def test_webhook_deliveries_due_get_a_job_and_are_looked_at_again_later(
    sweeper: Sweeper, redis_client: redis.Redis
) -> None:
    redis_client.zadd(keys.WEBHOOKS_DUE, {"task_due": 1.0, "task_later": time.time() + 3600})
    jobs = await _sweep(sweeper)
    assert [j for j in jobs if isinstance(j, WebhookJob)] == [WebhookJob(task_id="task_due")]
    assert float(redis_client.zscore(keys.WEBHOOKS_DUE, "task_due") or 0) > time.time()
    assert not [j for j in await _sweep(sweeper) if isinstance(j, WebhookJob)]


async def test_sweeps_never_overlap_and_one_done_frees_the_next(
    sweeper: Sweeper, store: TaskStore
) -> None:
    record = await _task(store)
    await asyncio.sleep(STALL_S * 2)
    assert await store.try_lock(keys.SWEEP_LOCK, 60)  # a sweep is running (however long)
    assert await sweeper.run() == []
    await store.r.delete(keys.SWEEP_LOCK)
    assert await sweeper.run() == [_step(record)]
    assert not await store.r.exists(keys.SWEEP_LOCK)  # released when done, not left to lapse
