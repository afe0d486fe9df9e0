"""The tool worker's store step on a real Redis: a result that cannot be stored still ends its
call, with an error the model reads, so the task never waits in waiting_tools for good."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
import redis

from services.tool_worker import worker
from shared import keys
from shared.jobs import Envelope, ToolRunJob
from shared.schema import ActionReturn, ActionStatusCode, AgentMessage, ToolCall
from shared.settings import ToolWorkerSettings
from shared.store import CallClaim, StepCommit
from shared.task import TaskRecord, TaskStatus

CALL = ToolCall(id="c1", name="IPythonInterpreter", parameters={"command": "print(1)"})
NEXT = Envelope("agent", "the next step's job")


@pytest.fixture
def shared(redis_server: str, redis_client: redis.Redis) -> Iterator[worker._Store]:
    shared = worker._Store(ToolWorkerSettings(redis_url=f"{redis_server}/0"))  # db 0 is flushed
    yield shared
    shared.loop.run(shared.store.close())
    shared.loop.close()


def _alive(shared: worker._Store, *nodes: str) -> None:
    """Heartbeats for tool workers of these names (a claim of a silent one holds nothing)."""
    for node in nodes:
        shared.loop.run(shared.store.r.set(keys.tool_worker_alive(node), "run", ex=60))


def _waiting_for(shared: worker._Store, call: ToolCall) -> ToolRunJob:
    """A task whose step 0 called `call` and waits for its result, and the call's job."""
    record = TaskRecord(tenant="t", session_id="s", input="hi")
    calls = [call.model_dump(mode="json")]
    turn = AgentMessage(sender="assistant", content="", formatted={"tool_calls": calls})
    commit = StepCommit(record, TaskStatus.WAITING_TOOLS, {"memory": [turn]}, [turn],
                        fields={"pending_calls": calls})  # fmt: skip
    shared.loop.run(shared.store.create(record))
    assert shared.loop.run(shared.store.commit_step(commit))[0]
    return ToolRunJob(task_id=record.id, step=0, tenant="t", session_id="s", call=call)


@pytest.mark.parametrize(
    "content",
    ["printed \ud800 by a hook", object()],  # text no encoder takes; a value that is not JSON
)
def test_a_result_that_cannot_be_stored_reaches_the_model_as_an_error(
    shared: worker._Store, content: object
) -> None:
    job = _waiting_for(shared, CALL)
    unstorable = AgentMessage.tool_result(
        CALL, ActionReturn(type=CALL.name, result=[{"type": "text", "content": content}])
    )
    stored = worker._store_result(shared, job, unstorable, NEXT)
    assert stored.complete and stored.advance  # the next step starts
    (result,) = shared.loop.run(shared.store.tool_results(job.task_id, 0, [CALL]))
    assert isinstance(result.content, ActionReturn)
    assert result.content.state == ActionStatusCode.API_ERROR
    assert "its result could not be stored" in (result.content.errmsg or "")
    assert result.tool_call_id == CALL.id


def test_a_storable_result_is_stored_as_it_is(shared: worker._Store) -> None:
    job = _waiting_for(shared, CALL)
    fine = AgentMessage.tool_result(
        CALL, ActionReturn(type=CALL.name, result=[{"type": "text", "content": "1"}])
    )
    assert worker._store_result(shared, job, fine, NEXT).advance
    assert shared.loop.run(shared.store.tool_results(job.task_id, 0, [CALL])) == [fine]


def test_a_call_another_copy_runs_is_not_run_again(shared: worker._Store) -> None:
    job = _waiting_for(shared, CALL)
    store, run = shared.store, shared.loop.run
    _alive(shared, "elsewhere")
    assert run(store.claim_call(job.task_id, 0, CALL.id, "elsewhere", 60)) == "claimed"
    assert worker._claim(shared, job) == "busy"  # a duplicate while the first copy runs
    run(store.release_call(job.task_id, 0, CALL.id, "elsewhere"))
    assert worker._claim(shared, job) == "claimed"  # the first copy failed: a retry may run it
    fine = AgentMessage.tool_result(
        CALL, ActionReturn(type=CALL.name, result=[{"type": "text", "content": "1"}])
    )
    assert shared.placement.claim("t:s").verdict == "new"  # this worker holds the session now
    claim = CallClaim(worker._me.node, "t:s", 60)
    assert worker._store_result(shared, job, fine, NEXT, claim).advance
    assert worker._claim(shared, job) == "done"  # its result is in
    claim_key = keys.tool_call_claim(job.task_id, 0, CALL.id)
    assert not run(store.r.exists(claim_key))  # freed with the result
    record = keys.session_sandbox("t:s")
    assert 0 < run(store.r.ttl(record)) <= 60  # the interpreter's record kept with its use
    assert float(run(store.r.hget(record, "last_used"))) > 0


def test_a_restarted_worker_frees_only_the_claims_it_still_holds(shared: worker._Store) -> None:
    store, run = shared.store, shared.loop.run
    _alive(shared, "w1", "w2", "w3")
    assert run(store.claim_call("task_a", 0, "c1", "w1", 60)) == "claimed"
    assert run(store.claim_call("task_b", 0, "c1", "w1", 0.05)) == "claimed"
    redis_ = shared.store.r
    run(asyncio.sleep(0.1))  # task_b's claim lapsed ...
    assert run(store.claim_call("task_b", 0, "c1", "w2", 60)) == "claimed"  # ... w2 took it
    assert run(store.release_worker_claims("w1")) == 1
    assert run(store.claim_call("task_a", 0, "c1", "w3", 60)) == "claimed"  # free at once
    assert run(store.claim_call("task_b", 0, "c1", "w3", 60)) == "busy"  # still w2's
    assert run(redis_.exists(keys.tool_worker_claims("w1"))) == 0


def test_a_claim_of_a_worker_whose_heartbeat_lapsed_holds_nothing_back(
    shared: worker._Store,
) -> None:
    store, run = shared.store, shared.loop.run
    _alive(shared, "w2")
    assert run(store.claim_call("task_a", 0, "c1", "w1", 60)) == "claimed"  # w1 never beat
    assert run(store.claim_call("task_a", 0, "c1", "w2", 60)) == "claimed"  # taken at once
    assert run(store.claim_call("task_a", 0, "c1", "w1", 60)) == "busy"  # w2 lives
