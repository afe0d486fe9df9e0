"""What a two-step task (a code cell, then the answer) costs Redis in the store's scripts, on
a real Redis with the broker on the store's database (the default): every write and read a
step makes, counted, so a command added anywhere on the path shows here. The whole stack's
figure, Celery's jobs included, is `make bench`'s (39 a step; issue 30's target is 40)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis

from taskyard.agentkit.schema import ActionReturn, AgentMessage, ToolCall
from taskyard.plumbing.celery_app import make_celery
from taskyard.plumbing.settings import AgentWorkerSettings
from taskyard.runtime.jobs import AgentStepJob, ToolRunJob, envelope
from taskyard.runtime.store import InterpreterUse, StepCommit, TaskStore
from taskyard.runtime.store.sandboxes import SandboxDirectory, ToolWorkerId
from taskyard.runtime.store.tool_calls import call_claim
from taskyard.runtime.task import TaskRecord, TaskStatus

# The scripts' commands for one such task in a warm session, their EVALSHAs included: create
# 11, the first step's begin 9 and commit 10, the call's claims 5 and result 13, the second
# step's begin 7 and commit 10 (11 with a token event left to write; docs/benchmarks.md,
# "Redis at 39 commands a step").
BUDGET = 65
CODE = ToolCall(id="c1", name="IPythonInterpreter", parameters={"command": "print(1)"})
WORKER = ToolWorkerId("tools@budget")


@pytest.fixture
async def one_db_store(redis_server: str, redis_client: redis.Redis) -> AsyncIterator[TaskStore]:
    store = TaskStore.from_url(f"{redis_server}/0", f"{redis_server}/0")
    yield store
    await store.close()


def _calls(client: redis.Redis) -> int:
    return sum(stat["calls"] for stat in client.info("commandstats").values())


async def _two_steps(store: TaskStore, n: int) -> None:
    """The task the capacity bench runs: a cell, its result, the answer."""
    celery = make_celery(AgentWorkerSettings())
    record = TaskRecord(tenant="t", session_id="s", input=f"task {n}")
    await store.create(record, envelope(celery, AgentStepJob.first(record)))
    start = await store.begin_step(record.id, 0, "t", "s", {"memory": 2 * n}, "0")
    assert start is not None
    job = ToolRunJob(task_id=record.id, step=0, tenant="t", session_id="s", call=CODE)
    reply = AgentMessage(sender="assistant", content="", formatted={"tool_calls": [CODE]})
    first = StepCommit(start.record, TaskStatus.WAITING_TOOLS,
                       {"memory": [record.user_message(), reply]}, [reply],
                       fields={"pending_calls": [CODE.model_dump(mode="json")]},
                       jobs=[envelope(celery, job)])  # fmt: skip
    assert (await store.commit_step(first))[0]
    claim = call_claim(record.id, 0, CODE.id, WORKER.node, WORKER.incarnation, 60)
    session, claimed = await SandboxDirectory(store).claim_run(WORKER, job.session_key, None, claim)
    assert claimed == "claimed" and session is not None
    result = AgentMessage.tool_result(CODE, ActionReturn(type=CODE.name, result=[]))
    cells = {"codes": ["print(1)"], "keep": 100, "ttl_s": 60}
    used = InterpreterUse(job.session_key, 60, cells)
    nxt = envelope(celery, AgentStepJob.after_tools(job))
    assert (await store.put_tool_result(record.id, 0, CODE.id, result, nxt, used)).advance
    start = await store.begin_step(record.id, 1, "t", "s", {"memory": 2 * n + 2}, "0")
    assert start is not None
    answer = AgentMessage(sender="assistant", content="1")
    last = StepCommit(start.record, TaskStatus.SUCCEEDED, {"memory": [result, answer]}, [answer],
                      fields={"result": "1"})  # fmt: skip
    assert (await store.commit_step(last))[0]


async def test_a_two_step_task_in_a_warm_session_stays_within_its_command_budget(
    one_db_store: TaskStore, redis_client: redis.Redis
) -> None:
    await SandboxDirectory(one_db_store).beat(WORKER, 60)  # the tool worker lives
    await _two_steps(one_db_store, 0)  # the session's first: its interpreter claimed anew
    before = _calls(redis_client)
    await _two_steps(one_db_store, 1)
    spent = _calls(redis_client) - before - 1  # the INFO that read `before`
    assert spent <= BUDGET, f"{spent} Redis commands for a two-step task, over {BUDGET}"
