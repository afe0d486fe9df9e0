"""A composite agent's whole `state_dict` (every sub-agent's memory, its session values)
round-trips through Redis between steps: loaded cold by a worker that never saw the session,
and brought up to date in a worker whose warm copy another worker left behind."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable

import aiohttp
import pytest
import redis

import tests.plugins.composite_agents  # noqa: F401 - registers the agents
from devstack.scripted_model import ScriptedModelThread
from services.agent_worker.live_agents import LiveAgents
from services.agent_worker.runtime import worker_agent
from services.agent_worker.step import StepRunner
from taskyard.agentkit.agents import AsyncAgent
from taskyard.agentkit.spec import AgentSpec
from taskyard.plumbing import keys
from taskyard.plumbing.celery_app import make_celery
from taskyard.plumbing.settings import AgentWorkerSettings
from taskyard.runtime.cancel import CancelWatch
from taskyard.runtime.jobs import AgentStepJob
from taskyard.runtime.store import TaskStore
from taskyard.runtime.store.sessions import forget_session
from taskyard.runtime.task import TaskRecord, TaskStatus

Runners = Callable[[], StepRunner]


@pytest.fixture
async def runners(
    store: TaskStore, model: ScriptedModelThread, redis_server: str
) -> AsyncIterator[Runners]:
    """Makes step runners that share nothing but Redis: each is another worker process."""
    settings = AgentWorkerSettings(llm_base_url=model.base_url, token_flush_s=0,
                        redis_url=f"{redis_server}/0", broker_url=f"{redis_server}/1")  # fmt: skip
    async with aiohttp.ClientSession() as http:

        def build(spec: AgentSpec) -> AsyncAgent:
            return worker_agent(spec, settings, http, None)

        def runner() -> StepRunner:
            agents = LiveAgents(build)
            return StepRunner(store, settings, agents, CancelWatch(store.r), make_celery(settings))

        yield runner


async def _run(store: TaskStore, runner: StepRunner, agent: str, text: str) -> str:
    record = TaskRecord(tenant="t", session_id="s", input=text, spec=AgentSpec(agent=agent))
    assert (await store.create(record)).holds_session
    await runner.run(AgentStepJob(task_id=record.id, step=0, tenant="t", session_id="s"))
    done = await store.get(record.id)
    assert done is not None and done.status == TaskStatus.SUCCEEDED, done
    return done.result or ""


def _counts(result: str) -> list[int]:
    """How many messages each sub-agent's model call was sent, last sub-agent first."""
    return [int(n) for n in re.findall(r"\[(\d+) messages\]", result)]


@pytest.mark.parametrize("workers", ["cold", "stale"])
async def test_sub_agent_memories_and_values_persist_across_tasks(
    runners: Runners, store: TaskStore, redis_client: redis.Redis, workers: str
) -> None:
    a, b = runners(), runners()
    # cold: every task on a worker that never saw the session; stale: the third task on the
    # first worker again, whose warm copy of the session lacks the second task.
    order = [runners(), runners(), runners()] if workers == "cold" else [a, b, a]
    results = [await _run(store, r, "writer_critic", f"task {i}") for i, r in enumerate(order)]
    # Each sub-agent saw its own earlier turns: 1, 3, then 5 messages.
    assert [_counts(r) for r in results] == [[1, 1], [3, 3], [5, 5]]
    assert [r.split(":")[0] for r in results] == ["round 1", "round 2", "round 3"]
    state = {
        path: redis_client.llen(keys.session_memory("t", "s", path))
        for path in ("memory", "writer.memory", "critics.0.memory")
    }
    assert state == {"memory": 6, "writer.memory": 6, "critics.0.memory": 6}
    assert redis_client.hgetall(keys.session_values("t", "s")) == {"rounds": '{"count":3}'}


async def test_a_sequential_pipelines_sub_agents_persist(
    runners: Runners, store: TaskStore
) -> None:
    results = [await _run(store, runners(), "pipeline_pair", f"task {i}") for i in range(3)]
    assert [_counts(r) for r in results] == [[1, 1], [3, 3], [5, 5]]
    second = await store.memory("t", "s", "1.memory")
    assert [m.sender for m in second] == ["first", "second"] * 3


async def test_a_forgotten_session_starts_afresh_in_a_warm_worker(
    runners: Runners, store: TaskStore
) -> None:
    runner = runners()
    await _run(store, runner, "writer_critic", "one")
    await forget_session(store, "t", "s")
    result = await _run(store, runner, "writer_critic", "two")
    assert _counts(result) == [1, 1] and result.startswith("round 1:")
