"""Tasks in the store against a real Redis: the record, idempotency, the event stream, the
session's hand-over (and the first step it pushes), replicated creates."""

from __future__ import annotations

import asyncio

import pytest
import redis
from redis_group import RedisGroup
from store_support import broker_queue, created, new_record

from taskyard.agentkit.schema import AgentMessage
from taskyard.agentkit.spec import AgentSpec
from taskyard.plumbing import keys
from taskyard.runtime.events import EventKind
from taskyard.runtime.jobs import Envelope
from taskyard.runtime.store import NotReplicated, StepCommit, TaskStore
from taskyard.runtime.task import TaskStatus


async def test_task_record_written_and_read_back(store: TaskStore) -> None:
    record = await created(store)
    assert await store.get(record.id) == record
    assert await store.get("task_missing") is None


async def test_one_idempotency_key_creates_one_task_under_concurrency(store: TaskStore) -> None:
    records = [new_record() for _ in range(30)]
    created = await asyncio.gather(
        *(store.create(r, idempotency_key="k1", fingerprint="body-a") for r in records)
    )
    assert [c.outcome for c in created].count("created") == 1
    winner = next(c.task_id for c in created if c.outcome == "created")
    assert {c.task_id for c in created} == {winner}
    assert {c.fingerprint for c in created if c.outcome == "existing"} == {"body-a"}
    other = await store.create(new_record(), idempotency_key="k2", fingerprint="body-a")
    assert other.outcome == "created" and other.task_id != winner


async def test_event_stream_round_trip_and_resume(store: TaskStore) -> None:
    record = await created(store)
    msg = AgentMessage(sender="assistant", content="x", formatted={"tool_calls": []})
    assert await store.publish(record.id, EventKind.MESSAGE, msg.model_dump(mode="json"))
    assert (await store.end(record, TaskStatus.FAILED, error="boom"))[0]
    events = await store.events(record.id)
    kinds = [EventKind.STATUS, EventKind.MESSAGE, EventKind.MESSAGE, EventKind.STATUS]
    assert [e.kind for e in events] == kinds  # queued, the user's message, ours, failed
    assert events[-1].is_final and not events[0].is_final
    assert events[-1].data == {"status": "failed", "error": "boom"}
    assert await store.messages(record.id) == [record.user_message(), msg]
    assert await store.events(record.id, after=events[0].id) == events[1:]
    # Nothing follows a task's final event.
    assert await store.publish(record.id, EventKind.TOKEN, {"delta": "late"}) is None
    assert len(await store.events(record.id)) == 4


async def test_session_is_held_by_one_task_and_handed_over(store: TaskStore) -> None:
    first, second = new_record(), new_record()
    assert (await store.create(first)).holds_session
    assert not (await store.create(second)).holds_session
    refused = await store.create(new_record(), busy="reject")
    assert refused.outcome == "busy" and refused.task_id == first.id  # who holds it, for the 409
    done = StepCommit(first, TaskStatus.SUCCEEDED, fields={"result": "x"})
    assert await store.commit_step(done) == (True, second.id)
    assert await store.session_holder("acme", "s1") == second.id
    assert await store.release_session(second) is None
    assert await store.session_holder("acme", "s1") is None


async def test_a_cancelled_waiting_task_leaves_the_queue(store: TaskStore) -> None:
    # A waits; B and C queue behind it; cancelling B must not strand C.
    a, b, c = new_record(), new_record(), new_record()
    for record in (a, b, c):
        await store.create(record)
    assert await store.end(b, TaskStatus.CANCELLED) == (True, None)
    assert await store.end(a, TaskStatus.CANCELLED) == (True, c.id)
    assert await store.session_holder("acme", "s1") == c.id


async def test_spec_keeps_only_the_fields_the_task_set(store: TaskStore) -> None:
    record = await created(store, spec=AgentSpec(agent="unit_expert"))
    stored = await store.get(record.id)
    assert stored is not None
    assert stored.spec.model_fields_set == {"agent"}


async def test_creating_racing_an_ending_never_strands_a_task(store: TaskStore) -> None:
    # Whatever the interleaving, the second task ends up holding the session, never waiting
    # behind a lock nobody holds.
    for _ in range(100):
        first, second = new_record(), new_record()
        assert (await store.create(first)).holds_session
        created, (_, following) = await asyncio.gather(
            store.create(second), store.end(first, TaskStatus.CANCELLED)
        )
        assert created.holds_session or following == second.id
        assert await store.session_holder("acme", "s1") == second.id
        await store.end(second, TaskStatus.CANCELLED)


async def test_the_write_passing_a_session_on_pushes_the_next_tasks_first_step(
    store: TaskStore, redis_server: str
) -> None:
    # The task taking the session gets its first step from the same script that hands it
    # over (a commit, an end, a heal): no worker has to send it afterwards.
    redis.Redis.from_url(f"{redis_server}/1").flushdb()
    first, second, third, fourth = new_record(), new_record(), new_record(), new_record()
    for record in (first, second, third, fourth):
        await store.create(record, Envelope("q", f"{record.id} step 0"))
    assert broker_queue(redis_server, "q") == [f"{first.id} step 0"]
    done = StepCommit(first, TaskStatus.SUCCEEDED, fields={"result": "x"})
    assert await store.commit_step(done) == (True, second.id)
    assert broker_queue(redis_server, "q")[0] == f"{second.id} step 0"
    assert await store.end(second, TaskStatus.CANCELLED) == (True, third.id)
    assert broker_queue(redis_server, "q")[0] == f"{third.id} step 0"
    await store.r.delete(keys.session_lock("acme", "s1"))  # as if its holder's end was lost
    assert await store.heal_session("acme", "s1") == fourth.id
    assert broker_queue(redis_server, "q")[0] == f"{fourth.id} step 0"
    assert len(broker_queue(redis_server, "q")) == 4  # each pushed once
    assert await store.r.hget(keys.task(fourth.id), "first_message") is None  # spent


async def test_a_replicated_create_answers_once_the_replica_holds_the_task(
    redis_group: RedisGroup,
) -> None:
    primary = redis_group.primary_url
    store = TaskStore.from_url(f"{primary}/0", f"{primary}/1")
    replica = redis.Redis(port=redis_group.sentinels.replica_port, decode_responses=True)
    wait = {"replicas": 1, "replicas_timeout_ms": 10_000}  # a loaded machine is slow
    try:
        record = new_record()
        created = await store.create(record, idempotency_key="k", fingerprint="f", **wait)
        assert created.outcome == "created"
        assert replica.hget(keys.task(record.id), "id") == record.id  # there, no waiting
        await store.r.config_set("repl-ping-replica-period", 3600)  # the offset moves for us
        before = int(replica.info("replication")["master_repl_offset"])
        again = await store.create(new_record(), idempotency_key="k", fingerprint="f", **wait)
        assert (again.outcome, again.task_id) == ("existing", record.id)
        # The answer for a task made before wrote too: its WAIT covered the first write.
        assert int(replica.info("replication")["master_repl_offset"]) > before
        await store.r.script_flush()  # as a promoted replica's empty script cache
        assert (await store.create(new_record(), **wait)).outcome == "created"
    finally:
        replica.close()
        await store.close()


async def test_a_create_no_replica_confirms_is_refused_though_stored(store: TaskStore) -> None:
    record = new_record()
    with pytest.raises(NotReplicated) as refused:
        await store.create(record, replicas=1, replicas_timeout_ms=50)
    assert (refused.value.wanted, refused.value.confirmed) == (1, 0)
    assert await store.get(record.id) == record  # on the primary: it may run
    busy = await store.create(new_record(), busy="reject", replicas=1, replicas_timeout_ms=50)
    assert busy.outcome == "busy"  # a refusal promises nothing: no wait is held against it
