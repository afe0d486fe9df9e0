"""The Redis store against a real Redis: task record, event stream, memory, step commits,
the session hand-over, each a Lua script."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis
from redis_group import RedisGroup

from shared import keys
from shared.events import EventKind
from shared.jobs import Envelope
from shared.schema import ActionReturn, AgentMessage, ToolCall
from shared.spec import AgentSpec
from shared.store import NotReplicated, StepCommit, TaskStore
from shared.task import TaskRecord, TaskStatus


@pytest.fixture
async def store(redis_server: str, redis_client: redis.Redis) -> AsyncIterator[TaskStore]:
    store = TaskStore.from_url(f"{redis_server}/0", f"{redis_server}/1")  # db 0 is flushed
    yield store
    await store.close()


def _record(**kw: object) -> TaskRecord:
    return TaskRecord(tenant="acme", session_id="s1", input="hi", **kw)


async def _created(store: TaskStore, **kw: object) -> TaskRecord:
    record = _record(**kw)
    assert (await store.create(record)).outcome == "created"
    return record


def _result(call_id: str, text: str = "42") -> AgentMessage:
    ret = ActionReturn(type="T", result=[{"type": "text", "content": text}])
    return AgentMessage(sender="T", content=ret, extra_info={"tool_call_id": call_id})


async def test_task_record_written_and_read_back(store: TaskStore) -> None:
    record = await _created(store)
    assert await store.get(record.id) == record
    assert await store.get("task_missing") is None


async def test_one_idempotency_key_creates_one_task_under_concurrency(store: TaskStore) -> None:
    records = [_record() for _ in range(30)]
    created = await asyncio.gather(
        *(store.create(r, idempotency_key="k1", fingerprint="body-a") for r in records)
    )
    assert [c.outcome for c in created].count("created") == 1
    winner = next(c.task_id for c in created if c.outcome == "created")
    assert {c.task_id for c in created} == {winner}
    assert {c.fingerprint for c in created if c.outcome == "existing"} == {"body-a"}
    other = await store.create(_record(), idempotency_key="k2", fingerprint="body-a")
    assert other.outcome == "created" and other.task_id != winner


async def test_event_stream_round_trip_and_resume(store: TaskStore) -> None:
    record = await _created(store)
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


async def test_commit_step_applies_once(store: TaskStore) -> None:
    record = await _created(store)
    user, reply = AgentMessage(content="hi"), AgentMessage(sender="assistant", content="hello")
    commit = StepCommit(
        record, TaskStatus.SUCCEEDED, {"memory": [user, reply]}, [reply],
        {"prompt_tokens": 12, "completion_tokens": 3}, {"result": "hello"}, {"result": "hello"},
    )  # fmt: skip
    assert await store.commit_step(commit) == (True, None)
    assert await store.commit_step(commit) == (False, None)  # a redelivered job's commit
    after = await store.get(record.id)
    assert after is not None and after.step == 1 and after.result == "hello"
    assert after.status == TaskStatus.SUCCEEDED
    assert (after.prompt_tokens, after.completion_tokens) == (12, 3)  # counted once
    assert await store.memory("acme", "s1") == [user, reply]
    assert (await store.events(record.id))[-1].data == {"status": "succeeded", "result": "hello"}


async def test_sub_agent_memories_are_their_own_lists(store: TaskStore) -> None:
    record = await _created(store)
    a, b = AgentMessage(content="to top"), AgentMessage(content="to writer")
    commit = StepCommit(record, TaskStatus.SUCCEEDED, {"memory": [a], "writer.memory": [b]})
    assert (await store.commit_step(commit))[0]
    assert await store.memory("acme", "s1") == [a]
    assert await store.memory("acme", "s1", "writer.memory") == [b]


async def test_begin_step_reads_only_new_memory_and_marks_running_once(
    store: TaskStore, redis_client: redis.Redis
) -> None:
    old = [AgentMessage(content=f"m{i}") for i in range(5)]
    _rpush(redis_client, old)
    record = await _created(store)
    start = await store.begin_step(record.id, 0, "acme", "s1", {"memory": 3}, "0")
    assert start is not None and start.current and start.began
    assert start.record.status == TaskStatus.RUNNING
    assert start.memories["memory"].offset == 3
    assert start.memories["memory"].messages == old[3:]
    assert start.inputs() == [AgentMessage(sender="user", content="hi")]
    again = await store.begin_step(record.id, 0, "acme", "s1", {"memory": 9}, "0")
    assert again is not None and again.current and not again.began
    assert again.memories["memory"].offset == 0  # holds more than Redis has: read it whole
    redis_client.incr(keys.session_epoch("acme", "s1"))
    rewritten = await store.begin_step(record.id, 0, "acme", "s1", {"memory": 3}, "0")
    assert rewritten is not None and rewritten.memories["memory"].offset == 0
    assert rewritten.epoch == "1"
    stale = await store.begin_step(record.id, 1, "acme", "s1", {"memory": 0}, "0")
    assert stale is not None and not stale.current
    assert await store.begin_step("task_missing", 0, "acme", "s1", {}, "0") is None


async def test_a_memory_read_whole_brings_the_sessions_compaction_along(
    store: TaskStore, redis_client: redis.Redis
) -> None:
    _rpush(redis_client, [AgentMessage(content=f"m{i}") for i in range(5)])
    summary = AgentMessage(sender="system", content="what came before, in short")
    record = await _created(store)
    assert await store.save_compaction(record, 3, summary)
    whole = await store.begin_step(record.id, 0, "acme", "s1", {"memory": 0}, "0")
    assert whole is not None and whole.compaction == (3, summary)
    tail = await store.begin_step(record.id, 0, "acme", "s1", {"memory": 5}, "0")
    assert tail is not None and tail.compaction is None  # a warm agent has it already


def _rpush(client: redis.Redis, messages: list[AgentMessage]) -> None:
    client.rpush(keys.session_memory("acme", "s1"), *(m.model_dump_json() for m in messages))


async def test_tool_results_complete_the_step_once(store: TaskStore) -> None:
    record = await _created(store)
    calls = [ToolCall(id="a", name="T"), ToolCall(id="b", name="T")]
    call_dicts = [c.model_dump(mode="json") for c in calls]
    reply = AgentMessage(sender="assistant", content="", formatted={"tool_calls": call_dicts})
    commit = StepCommit(record, TaskStatus.WAITING_TOOLS, {"memory": [reply]}, [reply],
                        fields={"pending_calls": call_dicts})  # fmt: skip
    assert (await store.commit_step(commit))[0]
    first = await store.put_tool_result(record.id, 0, "b", _result("b"))
    assert not first.complete and not first.advance
    second = await store.put_tool_result(record.id, 0, "a", _result("a"))
    assert second.complete and second.advance
    again = await store.put_tool_result(record.id, 0, "a", _result("a", "other"))
    assert again.complete and not again.advance  # exactly one caller advances
    assert await store.tool_results(record.id, 0, calls) == [_result("a"), _result("b")]
    start = await store.begin_step(record.id, 1, "acme", "s1", {"memory": 0}, "0")
    assert start is not None and start.inputs() == [_result("a"), _result("b")]


async def test_an_ended_task_takes_no_more_results_or_steps(store: TaskStore) -> None:
    record = await _created(store)
    assert await store.end(record, TaskStatus.CANCELLED, error="cancelled by the client")
    late_start = await store.begin_step(record.id, 0, "acme", "s1", {"memory": 0}, "0")
    assert late_start is not None and not late_start.current and not late_start.began
    late = StepCommit(record, TaskStatus.SUCCEEDED, fields={"result": "late"})
    assert await store.commit_step(late) == (False, None)
    stored = await store.put_tool_result(record.id, 0, "a", _result("a"))
    assert not stored.live and not await store.r.hexists(keys.task_tool_results(record.id, 0), "a")
    ended = await store.get(record.id)
    assert ended is not None and ended.status == TaskStatus.CANCELLED and ended.result is None
    assert (await store.end(record, TaskStatus.FAILED))[0] is False  # ended stays ended


async def test_session_is_held_by_one_task_and_handed_over(store: TaskStore) -> None:
    first, second = _record(), _record()
    assert (await store.create(first)).holds_session
    assert not (await store.create(second)).holds_session
    refused = await store.create(_record(), busy="reject")
    assert refused.outcome == "busy" and refused.task_id == first.id  # who holds it, for the 409
    done = StepCommit(first, TaskStatus.SUCCEEDED, fields={"result": "x"})
    assert await store.commit_step(done) == (True, second.id)
    assert await store.session_holder("acme", "s1") == second.id
    assert await store.release_session(second) is None
    assert await store.session_holder("acme", "s1") is None


async def test_a_cancelled_waiting_task_leaves_the_queue(store: TaskStore) -> None:
    # A waits; B and C queue behind it; cancelling B must not strand C.
    a, b, c = _record(), _record(), _record()
    for record in (a, b, c):
        await store.create(record)
    assert await store.end(b, TaskStatus.CANCELLED) == (True, None)
    assert await store.end(a, TaskStatus.CANCELLED) == (True, c.id)
    assert await store.session_holder("acme", "s1") == c.id


async def test_spec_keeps_only_the_fields_the_task_set(store: TaskStore) -> None:
    record = await _created(store, spec=AgentSpec(agent="unit_expert"))
    stored = await store.get(record.id)
    assert stored is not None
    assert stored.spec.model_fields_set == {"agent"}


async def test_creating_racing_an_ending_never_strands_a_task(store: TaskStore) -> None:
    # Whatever the interleaving, the second task ends up holding the session, never waiting
    # behind a lock nobody holds.
    for _ in range(100):
        first, second = _record(), _record()
        assert (await store.create(first)).holds_session
        created, (_, following) = await asyncio.gather(
            store.create(second), store.end(first, TaskStatus.CANCELLED)
        )
        assert created.holds_session or following == second.id
        assert await store.session_holder("acme", "s1") == second.id
        await store.end(second, TaskStatus.CANCELLED)


def _broker_queue(redis_server: str, queue: str) -> list[str]:
    return redis.Redis.from_url(f"{redis_server}/1", decode_responses=True).lrange(queue, 0, -1)


async def test_jobs_go_to_the_broker_with_their_write_only(
    store: TaskStore, redis_server: str
) -> None:
    redis.Redis.from_url(f"{redis_server}/1").flushdb()
    first, second = _record(), _record()
    await store.create(first, Envelope("q", "first step"))
    await store.create(second, Envelope("q", "second, waiting: not pushed"))
    assert _broker_queue(redis_server, "q") == ["first step"]
    calls = [ToolCall(id="a", name="T").model_dump(mode="json")]
    commit = StepCommit(first, TaskStatus.WAITING_TOOLS, fields={"pending_calls": calls},
                        jobs=[Envelope("tools.T", "call a")])  # fmt: skip
    assert (await store.commit_step(commit))[0]
    assert not (await store.commit_step(commit))[0]  # a duplicate pushes nothing either
    assert _broker_queue(redis_server, "tools.T") == ["call a"]
    again = Envelope("q", "step 1")
    await store.put_tool_result(first.id, 0, "a", _result("a"), again)
    await store.put_tool_result(first.id, 0, "a", _result("a"), again)  # redelivered
    assert _broker_queue(redis_server, "q") == ["step 1", "first step"]  # newest first
    assert await store.r.exists("q") == 0  # nothing landed in the store's database


async def test_a_call_held_in_an_earlier_step_is_known(
    store: TaskStore, redis_client: redis.Redis
) -> None:
    redis_client.hset(keys.task_approvals("task_x", 1), "c1", '{"state": "denied"}')
    assert await store.was_held("task_x", 3, "c1")  # its step is over, but it was held
    assert not await store.was_held("task_x", 1, "c1")  # only steps before the one given
    assert not await store.was_held("task_x", 3, "c2")


async def test_a_replicated_create_answers_once_the_replica_holds_the_task(
    redis_group: RedisGroup,
) -> None:
    primary = redis_group.primary_url
    store = TaskStore.from_url(f"{primary}/0", f"{primary}/1")
    replica = redis.Redis(port=redis_group.sentinels.replica_port, decode_responses=True)
    wait = {"replicas": 1, "replicas_timeout_ms": 10_000}  # a loaded machine is slow
    try:
        record = _record()
        created = await store.create(record, idempotency_key="k", fingerprint="f", **wait)
        assert created.outcome == "created"
        assert replica.hget(keys.task(record.id), "id") == record.id  # there, no waiting
        await store.r.config_set("repl-ping-replica-period", 3600)  # the offset moves for us
        before = int(replica.info("replication")["master_repl_offset"])
        again = await store.create(_record(), idempotency_key="k", fingerprint="f", **wait)
        assert (again.outcome, again.task_id) == ("existing", record.id)
        # The answer for a task made before wrote too: its WAIT covered the first write.
        assert int(replica.info("replication")["master_repl_offset"]) > before
        await store.r.script_flush()  # as a promoted replica's empty script cache
        assert (await store.create(_record(), **wait)).outcome == "created"
    finally:
        replica.close()
        await store.close()


async def test_a_create_no_replica_confirms_is_refused_though_stored(store: TaskStore) -> None:
    record = _record()
    with pytest.raises(NotReplicated) as refused:
        await store.create(record, replicas=1, replicas_timeout_ms=50)
    assert (refused.value.wanted, refused.value.confirmed) == (1, 0)
    assert await store.get(record.id) == record  # on the primary: it may run
    busy = await store.create(_record(), busy="reject", replicas=1, replicas_timeout_ms=50)
    assert busy.outcome == "busy"  # a refusal promises nothing: no wait is held against it


async def test_the_write_passing_a_session_on_pushes_the_next_tasks_first_step(
    store: TaskStore, redis_server: str
) -> None:
    # The task taking the session gets its first step from the same script that hands it
    # over (a commit, an end, a heal): no worker has to send it afterwards.
    redis.Redis.from_url(f"{redis_server}/1").flushdb()
    first, second, third, fourth = _record(), _record(), _record(), _record()
    for record in (first, second, third, fourth):
        await store.create(record, Envelope("q", f"{record.id} step 0"))
    assert _broker_queue(redis_server, "q") == [f"{first.id} step 0"]
    done = StepCommit(first, TaskStatus.SUCCEEDED, fields={"result": "x"})
    assert await store.commit_step(done) == (True, second.id)
    assert _broker_queue(redis_server, "q")[0] == f"{second.id} step 0"
    assert await store.end(second, TaskStatus.CANCELLED) == (True, third.id)
    assert _broker_queue(redis_server, "q")[0] == f"{third.id} step 0"
    await store.r.delete(keys.session_lock("acme", "s1"))  # as if its holder's end was lost
    assert await store.heal_session("acme", "s1") == fourth.id
    assert _broker_queue(redis_server, "q")[0] == f"{fourth.id} step 0"
    assert len(_broker_queue(redis_server, "q")) == 4  # each pushed once
    assert await store.r.hget(keys.task(fourth.id), "first_message") is None  # spent
