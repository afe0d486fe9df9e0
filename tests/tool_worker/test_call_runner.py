"""The tool worker's runner on a real Redis, without Celery: a result that cannot be stored
still ends its call, with an error the model reads, so the task never waits in waiting_tools
for good; a call's claim keeps a duplicate from running it; the sessions' file requests and
a call the worker could not run is tried again, then the model told."""

from __future__ import annotations

from multiprocessing import pool
from typing import Any

import pytest
import redis

from devstack.waiting_calls import waiting_on
from services.tool_worker.call_runner import ToolCallRunner
from services.tool_worker.errors import CallFailed
from taskyard.agentkit.schema import ActionReturn, ActionStatusCode, AgentMessage, ToolCall
from taskyard.plumbing import keys
from taskyard.runtime.jobs import Envelope, ToolRunJob
from taskyard.runtime.store import InterpreterUse
from taskyard.runtime.task import TaskStatus

CALL = ToolCall(id="c1", name="IPythonInterpreter", parameters={"command": "print(1)"})
NEXT = Envelope("agent", "the next step's job")


def _alive(runner: ToolCallRunner, *nodes: str) -> None:
    """Heartbeats for tool workers of these names (a claim of a silent one holds nothing)."""
    for node in nodes:
        runner.loop.run(runner.store.r.set(keys.tool_worker_alive(node), "run", ex=60))


def _waiting_for(runner: ToolCallRunner, call: ToolCall) -> ToolRunJob:
    """A task whose step 0 called `call` and waits for its result, and the call's job."""
    return runner.loop.run(waiting_on(runner.store, call))


@pytest.mark.parametrize(
    "content",
    ["printed \ud800 by a hook", object()],  # text no encoder takes; a value that is not JSON
)
def test_a_result_that_cannot_be_stored_reaches_the_model_as_an_error(
    runner: ToolCallRunner, content: object
) -> None:
    job = _waiting_for(runner, CALL)
    unstorable = AgentMessage.tool_result(
        CALL, ActionReturn(type=CALL.name, result=[{"type": "text", "content": content}])
    )
    stored = runner.store_result(job, unstorable, NEXT)
    assert stored.advance  # the next step starts
    (result,) = runner.loop.run(runner.store.tool_results(job.task_id, 0, [CALL]))
    assert isinstance(result.content, ActionReturn)
    assert result.content.state == ActionStatusCode.API_ERROR
    assert "its result could not be stored" in (result.content.errmsg or "")
    assert result.tool_call_id == CALL.id


def test_a_storable_result_is_stored_as_it_is(runner: ToolCallRunner) -> None:
    job = _waiting_for(runner, CALL)
    fine = AgentMessage.tool_result(
        CALL, ActionReturn(type=CALL.name, result=[{"type": "text", "content": "1"}])
    )
    assert runner.store_result(job, fine, NEXT).advance
    assert runner.loop.run(runner.store.tool_results(job.task_id, 0, [CALL])) == [fine]


def test_a_call_another_copy_runs_is_not_run_again(runner: ToolCallRunner) -> None:
    job = _waiting_for(runner, CALL)
    store, run = runner.store, runner.loop.run
    _alive(runner, "elsewhere")
    assert run(store.claim_call(job.task_id, 0, CALL.id, "elsewhere", "run", 60)) == "claimed"
    assert runner.claim(job) == "busy"  # a duplicate while the first copy runs
    run(store.release_call(job.task_id, 0, CALL.id))
    assert runner.claim(job) == "claimed"  # the first copy failed: a retry may run it
    fine = AgentMessage.tool_result(
        CALL, ActionReturn(type=CALL.name, result=[{"type": "text", "content": "1"}])
    )
    assert runner.placement.claim("t:s").verdict == "new"  # this worker holds the session now
    assert runner.store_result(job, fine, NEXT, InterpreterUse("t:s", 60)).advance
    assert runner.claim(job) == "done"  # its result is in, its claim held or not
    record = keys.session_sandbox("t:s")
    assert 0 < run(store.r.ttl(record)) <= 60  # the interpreter's record kept with its use
    assert float(run(store.r.hget(record, "last_used"))) > 0


def test_a_restarted_worker_holds_back_no_call_its_earlier_run_claimed(
    runner: ToolCallRunner,
) -> None:
    store, run = runner.store, runner.loop.run
    _alive(runner, "w1", "w2")  # w1's heartbeat names its run "run"
    assert run(store.claim_call("task_a", 0, "c1", "w1", "before", 60)) == "claimed"
    assert run(store.claim_call("task_b", 0, "c1", "w1", "run", 60)) == "claimed"
    # w1 started again as "run": its earlier run's claim is free at once, not its own.
    assert run(store.claim_call("task_a", 0, "c1", "w2", "run", 60)) == "claimed"
    assert run(store.claim_call("task_b", 0, "c1", "w2", "run", 60)) == "busy"
    assert run(store.claim_call("task_a", 0, "c1", "w1", "run", 60)) == "busy"  # w2's now


def test_a_claim_of_a_worker_whose_heartbeat_lapsed_holds_nothing_back(
    runner: ToolCallRunner,
) -> None:
    store, run = runner.store, runner.loop.run
    _alive(runner, "w2")
    assert run(store.claim_call("task_a", 0, "c1", "w1", "run", 60)) == "claimed"  # no beat
    assert run(store.claim_call("task_a", 0, "c1", "w2", "run", 60)) == "claimed"  # at once
    assert run(store.claim_call("task_a", 0, "c1", "w1", "run", 60)) == "busy"  # w2 lives


def test_a_call_runs_once_and_its_result_starts_the_next_step(
    runner: ToolCallRunner, redis_server: str
) -> None:
    job = _waiting_for(runner, CALL)
    store, run = runner.store, runner.loop.run
    broker = redis.Redis.from_url(f"{redis_server}/{store.broker_db}")  # not flushed
    queued = broker.llen(keys.AGENT_QUEUE)
    runner.run_call(job)
    (result,) = run(store.tool_results(job.task_id, 0, [CALL]))
    assert isinstance(result.content, ActionReturn) and not result.content.errmsg
    assert "1" in result.content.format_result()
    assert runner.tools.has_sandbox("t:s")  # the session's interpreter lives here now
    runner.run_call(job)  # a copy of the job sent again: its result is in, nothing runs
    assert broker.llen(keys.AGENT_QUEUE) == queued + 1  # the next step's job, pushed once


def test_a_calls_claim_and_result_go_from_its_own_thread_not_through_the_store_loop(
    runner: ToolCallRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = _waiting_for(runner, CALL)
    hops: list[object] = []
    hop = runner.loop.run

    def counted(coro: Any, timeout: float | None = None) -> Any:
        hops.append(coro)
        return hop(coro, timeout)

    monkeypatch.setattr(runner.loop, "run", counted)
    assert pool.ThreadPool(1).apply(runner.run_call, (job,)) is None  # a pool thread, as Celery's
    assert hops == []
    monkeypatch.undo()
    (result,) = runner.loop.run(runner.store.tool_results(job.task_id, 0, [CALL]))
    assert isinstance(result.content, ActionReturn) and not result.content.errmsg


def test_a_call_the_worker_could_not_run_is_retried_then_the_model_told(
    runner: ToolCallRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = _waiting_for(runner, CALL)

    def broken(job: ToolRunJob) -> AgentMessage:
        raise OSError("the engine went away")

    monkeypatch.setattr(runner.tools, "run_job", broken)
    with pytest.raises(CallFailed) as failed:
        runner.run_call(job, may_retry=True)
    assert isinstance(failed.value.cause, OSError)
    claim_key = keys.tool_call_claim(job.task_id, 0, CALL.id)
    assert not runner.loop.run(runner.store.r.exists(claim_key))  # the retry may run it
    runner.run_call(job)  # the last try
    (result,) = runner.loop.run(runner.store.tool_results(job.task_id, 0, [CALL]))
    assert isinstance(result.content, ActionReturn)
    assert result.content.state == ActionStatusCode.API_ERROR
    assert "the tool could not run (OSError: the engine went away)" in (result.content.errmsg or "")


def test_a_calls_cells_are_recorded_by_its_results_write(
    runner: ToolCallRunner, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    written_alone: list[list[str]] = []

    async def write_alone(cells: str, codes: list[str]) -> None:
        written_alone.append(codes)

    monkeypatch.setattr(runner.cells, "_ran", write_alone)
    job = _waiting_for(runner, CALL)
    runner.run_call(job)
    assert written_alone == []  # no write of their own: the result's took them
    (result,) = runner.loop.run(runner.store.tool_results(job.task_id, 0, [CALL]))
    assert isinstance(result.content, ActionReturn) and not result.content.errmsg
    cells = keys.session_cells(job.session_key)
    assert redis_client.lrange(cells, 0, -1) == ["print(1)"]
    assert redis_client.ttl(cells) > 0


def test_a_call_whose_task_ended_while_it_waited_is_not_run(
    runner: ToolCallRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancel announced while the job waited in its queue reached no watch: its claim sees
    the task ended, and the call is not run (nor claimed)."""
    job = _waiting_for(runner, CALL)
    record = runner.loop.run(runner.store.get(job.task_id))
    assert record is not None
    assert runner.loop.run(runner.store.end(record, TaskStatus.CANCELLED, error="by test"))[0]
    ran: list[ToolRunJob] = []
    monkeypatch.setattr(runner.tools, "run_job", ran.append)
    runner.run_call(job)
    assert ran == []
    assert not runner.loop.run(runner.store.r.exists(keys.tool_call_claim(job.task_id, 0, "c1")))


def test_a_cancel_heard_before_the_cell_started_stops_it_once_it_has(
    runner: ToolCallRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The announcement comes after the claim, before the session's cell is under way (no
    interrupt can reach it yet): the watch tries again until the cell has started, then
    stops it, instead of letting it run to its end."""
    sleeper = ToolCall(id="c1", name="IPythonInterpreter",
                       parameters={"command": "import time\ntime.sleep(60)"})  # fmt: skip
    job = _waiting_for(runner, sleeper)
    run_job = runner.tools.run_job

    def announced_first(job: ToolRunJob) -> AgentMessage:
        runner.cancels.cancelled(job.task_id)  # heard now: nothing to interrupt yet
        return run_job(job)

    monkeypatch.setattr(runner.tools, "run_job", announced_first)
    ended = pool.ThreadPool(1).apply_async(runner.run_call, (job,))
    ended.get(timeout=20)  # not the cell's 60 s
    (result,) = runner.loop.run(runner.store.tool_results(job.task_id, 0, [sleeper]))
    assert isinstance(result.content, ActionReturn)
    assert "Cancelled" in (result.content.errmsg or ""), result.content
