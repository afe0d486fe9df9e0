"""The agent step's orchestration on a real Redis and the scripted model over HTTP: commits
once, sends tool calls, resumes a send a crash cut short, ends runaway tasks, keeps the
session warm, and stops for a cancel."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest
import redis

from devstack.scripted_model import ScriptedModelThread
from services.agent_worker.live_agents import LiveAgents
from services.agent_worker.runtime import worker_agent
from services.agent_worker.step import StepRunner
from taskyard.agentkit.schema import ActionReturn, AgentMessage
from taskyard.agentkit.spec import AgentSpec
from taskyard.plumbing import keys
from taskyard.plumbing.celery_app import make_celery
from taskyard.plumbing.settings import AgentWorkerSettings
from taskyard.runtime.cancel import CancelWatch
from taskyard.runtime.events import EventKind
from taskyard.runtime.jobs import AgentStepJob, ToolRunJob, envelope
from taskyard.runtime.store import TaskStore
from taskyard.runtime.task import TaskRecord, TaskStatus

QUESTION = "What is the square root of 2, to 12 decimal places? Use Python."


@pytest.fixture
async def runner(
    store: TaskStore, model: ScriptedModelThread, redis_server: str
) -> AsyncIterator[StepRunner]:
    settings = AgentWorkerSettings(
        llm_base_url=model.base_url, default_max_steps=4, token_flush_s=0,
        redis_url=f"{redis_server}/0", broker_url=f"{redis_server}/1",
    )  # fmt: skip
    redis.Redis.from_url(settings.broker_url).flushdb()
    async with aiohttp.ClientSession() as http:

        def build(spec: AgentSpec):  # type: ignore[no-untyped-def]
            return worker_agent(spec, settings, http, None)

        celery = make_celery(settings)
        yield StepRunner(store, settings, LiveAgents(build), CancelWatch(store.r), celery)


async def _task(store: TaskStore, text: str = QUESTION, **spec: object) -> TaskRecord:
    record = TaskRecord(tenant="t", session_id="s", input=text, spec=AgentSpec(**spec))
    assert (await store.create(record)).holds_session
    return record


def _sent(runner: StepRunner, queue: str = "tools.IPythonInterpreter") -> list[ToolRunJob]:
    """The tool jobs on the broker, oldest first (what the commits pushed)."""
    broker = redis.Redis.from_url(runner.settings.broker_url)
    raw = [json.loads(m) for m in reversed(broker.lrange(queue, 0, -1))]
    return [ToolRunJob.model_validate(json.loads(base64.b64decode(m["body"]))[0][0]) for m in raw]


def _steps(runner: StepRunner) -> list[AgentStepJob]:
    """The agent step jobs on the broker, oldest first."""
    broker = redis.Redis.from_url(runner.settings.broker_url)
    raw = [json.loads(m) for m in reversed(broker.lrange(keys.AGENT_QUEUE, 0, -1))]
    return [AgentStepJob.model_validate(json.loads(base64.b64decode(m["body"]))[0][0]) for m in raw]


async def _waiting(runner: StepRunner, store: TaskStore) -> TaskRecord:
    """A task queued behind the session's, with its first step's job as the gateway stores it."""
    waiting = TaskRecord(tenant="t", session_id="s", input="next")
    first = envelope(runner.celery, AgentStepJob.first(waiting))
    assert not (await store.create(waiting, first)).holds_session
    return waiting


def _job(record: TaskRecord, step: int = 0) -> AgentStepJob:
    return AgentStepJob(task_id=record.id, step=step, tenant="t", session_id="s")


async def _answer(store: TaskStore, job: ToolRunJob, text: str = "1.414213562373") -> None:
    ret = ActionReturn(type=job.call.name, result=[{"type": "text", "content": text}])
    await store.put_tool_result(job.task_id, job.step, job.call.id,
                                AgentMessage.tool_result(job.call, ret))  # fmt: skip


async def test_first_step_commits_and_sends_its_call(runner: StepRunner, store: TaskStore) -> None:
    record = await _task(store)
    await runner.run(_job(record))  # the commit pushed the tool job itself
    [job] = _sent(runner)
    assert (job.task_id, job.step, job.call.name) == (record.id, 0, "IPythonInterpreter")
    after = await store.get(record.id)
    assert after is not None and after.status == TaskStatus.WAITING_TOOLS and after.step == 1
    assert after.pending_calls == [job.call]
    assert [m.sender for m in await store.memory("t", "s")] == ["user", "assistant"]
    assert not any(e.kind == EventKind.TOKEN for e in await store.events(record.id))  # a call


async def test_a_duplicate_step_changes_nothing(runner: StepRunner, store: TaskStore) -> None:
    record = await _task(store)
    await runner.run(_job(record))
    await runner.run(_job(record))  # a second delivery of the same job
    assert len(await store.memory("t", "s")) == 2
    assert len(_sent(runner)) == 1  # its tool job went out once, with its commit


async def test_results_in_then_the_answer_ends_the_task_and_frees_the_session(
    runner: StepRunner, store: TaskStore
) -> None:
    record = await _task(store)
    waiting = await _waiting(runner, store)
    await runner.run(_job(record))
    await _answer(store, _sent(runner)[0])
    assert _steps(runner) == []  # the next task waits for the session
    await runner.run(_job(record, 1))
    done = await store.get(record.id)
    assert done is not None and done.status == TaskStatus.SUCCEEDED
    assert "1.414213562373" in (done.result or "")
    assert done.prompt_tokens > 0
    tokens = [e.data["delta"] for e in await store.events(record.id) if e.kind == EventKind.TOKEN]
    assert "".join(tokens) == done.result  # the answer streamed, then committed
    # The commit itself pushed the next task's first step: nothing is left for a send to
    # lose, should the worker die as the step returns.
    assert _steps(runner) == [AgentStepJob.first(waiting)]


async def test_max_steps_ends_a_runaway_task(runner: StepRunner, store: TaskStore) -> None:
    record = await _task(store, max_steps=1)
    await runner.run(_job(record))
    await _answer(store, _sent(runner)[0])
    await runner.run(_job(record, 1))
    failed = await store.get(record.id)
    assert failed is not None and failed.status == TaskStatus.FAILED
    assert failed.error == "max_steps (1) reached without a final answer"
    assert await store.session_holder("t", "s") is None


async def test_a_task_past_its_own_deadline_ends_timed_out_at_its_next_step(
    runner: StepRunner, store: TaskStore
) -> None:
    record = TaskRecord(tenant="t", session_id="s", input=QUESTION, deadline_s=0.5,
                        created_at=time.time() - 1)  # fmt: skip
    await store.create(record)
    await runner.run(_job(record))
    ended = await store.get(record.id)
    assert ended is not None and ended.status == TaskStatus.TIMED_OUT
    assert ended.error == "deadline of 0.5s passed"  # its own, not TASK_DEADLINE_S (600)
    assert "assistant" not in [m.sender for m in await store.memory("t", "s")]  # no model call


async def test_the_session_stays_warm_and_follows_redis(
    runner: StepRunner, store: TaskStore, redis_client: redis.Redis
) -> None:
    first = await _task(store, "hello", tools=[])
    await runner.run(_job(first))
    agent = runner.agents._sessions[("t", "s")].agent
    assert runner.agents.offsets("t", "s") == ({"memory": 2}, "0")
    second = await _task(store, "again", tools=[])
    await runner.run(_job(second))
    assert runner.agents._sessions[("t", "s")].agent is agent  # the same warm agent
    assert runner.agents.offsets("t", "s") == ({"memory": 4}, "0")
    # Someone rewrites the session in Redis: the next step reads it whole.
    memory = keys.session_memory("t", "s")
    redis_client.delete(memory)
    redis_client.rpush(memory, AgentMessage(content="only this").model_dump_json())
    redis_client.incr(keys.session_epoch("t", "s"))
    third = await _task(store, "and again", tools=[])
    await runner.run(_job(third))
    held = agent.memory.get_memory("s")  # type: ignore[union-attr]
    assert [m.content for m in held][:2] == ["only this", "and again"]
    assert runner.agents.offsets("t", "s") == ({"memory": 3}, "1")


async def test_an_ended_task_holding_its_session_passes_it_on(
    runner: StepRunner, store: TaskStore, redis_client: redis.Redis
) -> None:
    record = await _task(store)
    waiting = await _waiting(runner, store)
    # Ended without passing the session on (as a crash between the two could leave it).
    redis_client.hset(keys.task(record.id), "status", "failed")
    await runner.run(_job(record))
    assert _steps(runner) == [AgentStepJob.first(waiting)]  # pushed as the session passed


async def _in_model_call(
    runner: StepRunner, record: TaskRecord, model: ScriptedModelThread
) -> asyncio.Task[None]:
    """The record's step, run until the scripted model has its call (so a cancel finds it)."""
    assert model.server is not None
    counters = model.server.app.counters
    before = counters.requests
    step = asyncio.create_task(runner.run(_job(record)))
    async with asyncio.timeout(30):
        while counters.requests == before:
            await asyncio.sleep(0.01)
    return step


async def test_a_cancel_stops_the_model_call_and_applies_nothing(
    runner: StepRunner, store: TaskStore, model: ScriptedModelThread
) -> None:
    record = await _task(store)
    waiting = await _waiting(runner, store)
    assert model.server is not None
    model.server.app.options.latency_ms = 5000
    try:
        step = await _in_model_call(runner, record, model)
        ended, following = await store.end(record, TaskStatus.CANCELLED)
        runner.cancels.cancelled(record.id)  # what the cancel channel delivers
        await asyncio.wait_for(step, 2)
    finally:
        model.server.app.options.latency_ms = 0
    assert ended and following == waiting.id
    assert _steps(runner) == [AgentStepJob.first(waiting)]  # the cancel's end pushed it
    assert await store.memory("t", "s") == []  # nothing of the cancelled step
    assert ("t", "s") not in runner.agents._sessions  # its warm copy is dropped


@pytest.mark.parametrize("ends", ["its own error", "an answer"])
async def test_a_cancel_stops_the_step_however_the_agent_ends_its_call(
    runner: StepRunner, store: TaskStore, model: ScriptedModelThread, ends: str
) -> None:
    """A user's agent (or a library under it) may turn the cancel into an error of its own,
    or answer anyway: the step is stopped the same, nothing applied, no retry asked for."""
    record = await _task(store)
    assert model.server is not None
    model.server.app.options.latency_ms = 5000
    build = runner.agents.build

    def swallowing(spec: AgentSpec):  # type: ignore[no-untyped-def]
        agent = build(spec)
        original = agent.stream

        async def stream(*args: object, **kwargs: object):  # type: ignore[no-untyped-def]
            try:
                async for chunk in original(*args, **kwargs):
                    yield chunk
            except asyncio.CancelledError:
                if ends == "its own error":
                    raise RuntimeError("the model client closed") from None
                yield AgentMessage(sender=agent.name, content="an answer after all")

        agent.stream = stream
        return agent

    runner.agents.build = swallowing
    try:
        step = await _in_model_call(runner, record, model)
        await store.end(record, TaskStatus.CANCELLED)
        runner.cancels.cancelled(record.id)
        await asyncio.wait_for(step, 2)  # ends, raising nothing
    finally:
        model.server.app.options.latency_ms = 0
    assert await store.memory("t", "s") == []
    assert ("t", "s") not in runner.agents._sessions


async def test_a_step_that_would_pass_the_token_budget_fails_before_its_model_call(
    runner: StepRunner, store: TaskStore, redis_client: redis.Redis
) -> None:
    record = await _task(store, max_tokens_total=5000)
    await runner.run(_job(record))  # well within the budget
    await _answer(store, _sent(runner)[0])
    redis_client.hset(keys.task(record.id), "prompt_tokens", 4990)  # as if spent meanwhile
    await runner.run(_job(record, 1))
    failed = await store.get(record.id)
    assert failed is not None and failed.status == TaskStatus.FAILED
    assert (failed.error or "").startswith("token budget of 5000 would be passed: 4995 used")
    senders = [m.sender for m in await store.memory("t", "s")]
    assert senders == ["user", "assistant"]  # step 1 never ran
