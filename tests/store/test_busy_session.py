"""A task that arrives while its session runs another, by the store's scripts on a real Redis:
`interrupt` ends the running task and keeps what it committed, `rollback` also puts the
session back exactly as that task found it (every memory list of the agent tree, the values,
the compaction), and nothing of the displaced task lands afterwards."""

from __future__ import annotations

import pytest
import redis

from taskyard.agentkit.schema import ActionReturn, AgentMessage, ToolCall
from taskyard.plumbing import keys
from taskyard.runtime.events import EventKind
from taskyard.runtime.jobs import Envelope
from taskyard.runtime.store import StepCommit, TaskStore
from taskyard.runtime.task import TaskRecord, TaskStatus

T, S = "acme", "s1"


def _record(text: str = "hi") -> TaskRecord:
    return TaskRecord(tenant=T, session_id=S, input=text)


def _said(*texts: str) -> list[AgentMessage]:
    return [AgentMessage(sender="assistant", content=t) for t in texts]


async def _begin(
    store: TaskStore, record: TaskRecord, step: int = 0, held: int = 0, epoch: str = "0"
) -> TaskRecord:
    """Begin the step, as a worker holding the session's first `held` messages of the epoch."""
    start = await store.begin_step(record.id, step, T, S, {"memory": held}, epoch)
    assert start is not None and start.current
    return start.record


async def _step(
    store: TaskStore, record: TaskRecord, memories: dict[str, list[AgentMessage]],
    values: dict[str, str] | None = None, status: TaskStatus = TaskStatus.WAITING_TOOLS,
) -> None:  # fmt: skip
    """Begin the task's next step and commit it with these writes (a tool call pending)."""
    running = await _begin(store, record, (await store.get(record.id) or record).step)
    calls = [ToolCall(id=f"c{running.step}", name="T").model_dump(mode="json")]
    commit = StepCommit(running, status, memories, fields={"pending_calls": calls},
                        values=values or {})  # fmt: skip
    assert (await store.commit_step(commit))[0]


async def _session(store: TaskStore) -> dict[str, object]:
    """Everything of the session a rollback must restore."""
    paths = sorted(await store.r.smembers(keys.session_paths(T, S)))
    lists = {p: await store.r.lrange(p, 0, -1) for p in paths}
    values = await store.r.hgetall(keys.session_values(T, S))
    return {"lists": lists, "values": values, "compaction": await store.compaction(T, S)}


def _broker(redis_server: str) -> list[str]:
    client = redis.Redis.from_url(f"{redis_server}/1", decode_responses=True)
    return list(reversed(client.lrange("agent", 0, -1)))  # oldest first


async def test_interrupt_cancels_the_running_task_keeps_its_steps_and_starts_now(
    store: TaskStore, redis_server: str
) -> None:
    running, waiting, new = _record("first"), _record("queued"), _record("now")
    await store.create(running, Envelope("agent", "step of first"))
    await store.create(waiting, Envelope("agent", "step of queued"))
    await _step(store, running, {"memory": _said("first's call")})
    created = await store.create(new, Envelope("agent", "step of now"), busy="interrupt")
    assert (created.outcome, created.holds_session, created.displaced) == (
        "created", True, running.id,
    )  # fmt: skip
    ended = await store.get(running.id)
    assert ended is not None and ended.status == TaskStatus.CANCELLED
    assert ended.error == f"interrupted by task {new.id}"
    last = (await store.events(running.id))[-1]
    assert last.is_final and last.data == {"status": "cancelled", "error": ended.error}
    first = (await store.events(new.id))[0]
    assert first.data == {"status": "queued", "interrupted": running.id}
    # Its committed step stays; the new task holds the session, its first step is sent; the
    # task that was waiting still waits, now behind the new one.
    assert [m.content for m in await store.memory(T, S)] == ["first's call"]
    assert await store.session_holder(T, S) == new.id
    assert _broker(redis_server) == ["step of first", "step of now"]
    assert await store.r.lrange(keys.session_waiting(T, S), 0, -1) == [waiting.id]
    # The interrupted task's call in flight and its step in flight land nowhere.
    result = AgentMessage(
        sender="T", content=ActionReturn(type="T"), extra_info={"tool_call_id": "c0"}
    )
    assert not (await store.put_tool_result(running.id, 0, "c0", result)).live
    late = StepCommit(ended.model_copy(update={"step": 1}), TaskStatus.SUCCEEDED,
                      {"memory": _said("late")})  # fmt: skip
    assert await store.commit_step(late) == (False, None)
    assert [m.content for m in await store.memory(T, S)] == ["first's call"]


async def test_rollback_puts_every_memory_value_and_the_compaction_back(
    store: TaskStore,
) -> None:
    earlier = _record("earlier")
    await store.create(earlier)
    await _step(store, earlier, {"memory": _said("m1", "m2"), "writer.memory": _said("w1")},
                {"counter": '{"n": 1}'}, TaskStatus.SUCCEEDED)  # fmt: skip
    summary = AgentMessage(sender="system", content="summary of m1")
    await store.r.hset(
        keys.session_compaction(T, S), mapping={"upto": "1", "summary": summary.model_dump_json()}
    )
    before = await _session(store)
    epoch = await store.r.get(keys.session_epoch(T, S))

    doomed = _record("doomed")
    await store.create(doomed)
    await _step(store, doomed, {"memory": _said("d1"), "writer.memory": _said("w2"),
                                "critics.0.memory": _said("c1")},
                {"counter": '{"n": 2}', "notes": '["d"]'})  # fmt: skip
    await _step(store, doomed, {"memory": _said("d2")})
    compacted = await store.get(doomed.id)
    assert compacted is not None
    assert await store.save_compaction(compacted, 3, AgentMessage(sender="system", content="x"))
    # Only the first compaction marks what it replaced: the second's would be the first's.
    assert await store.save_compaction(compacted, 4, AgentMessage(sender="system", content="z"))
    assert await _session(store) != before

    new = _record("instead")
    created = await store.create(new, busy="rollback")
    assert created.displaced == doomed.id
    assert await _session(store) == before  # the lists, the values, the compaction
    assert await store.r.get(keys.session_epoch(T, S)) != epoch  # warm copies read afresh
    ended = await store.get(doomed.id)
    assert ended is not None and ended.error == f"rolled back for task {new.id}"
    assert (await store.events(new.id))[0].data == {"status": "queued", "rolled_back": doomed.id}
    # What the rolled-back task still had in flight changes nothing any more.
    assert not await store.save_compaction(ended, 9, AgentMessage(sender="system", content="y"))
    late = StepCommit(ended, TaskStatus.SUCCEEDED, {"memory": _said("late")})
    assert await store.commit_step(late) == (False, None)
    assert await _session(store) == before


async def test_a_rollback_drops_the_compaction_of_a_session_that_had_none(
    store: TaskStore,
) -> None:
    earlier = _record("earlier")
    await store.create(earlier)
    await _step(store, earlier, {"memory": _said("m1")}, status=TaskStatus.SUCCEEDED)
    before = await _session(store)
    assert before["compaction"] is None
    doomed = _record("doomed")
    await store.create(doomed)
    await _step(store, doomed, {"memory": _said("d1")})
    compacting = await store.get(doomed.id)
    assert compacting is not None
    assert await store.save_compaction(compacting, 1, AgentMessage(sender="system", content="x"))
    await store.create(_record("instead"), busy="rollback")
    assert await _session(store) == before


async def test_a_rollback_leaves_a_compaction_the_task_did_not_replace(store: TaskStore) -> None:
    earlier = _record("earlier")
    await store.create(earlier)
    await _step(store, earlier, {"memory": _said("m1", "m2")}, status=TaskStatus.SUCCEEDED)
    summary = AgentMessage(sender="system", content="summary of m1")
    await store.r.hset(
        keys.session_compaction(T, S), mapping={"upto": "1", "summary": summary.model_dump_json()}
    )
    before = await _session(store)
    doomed = _record("doomed")
    await store.create(doomed)
    await _step(store, doomed, {"memory": _said("d1")}, {"counter": '{"n": 2}'})
    await store.create(_record("instead"), busy="rollback")
    assert await _session(store) == before  # its compaction too, never marked


async def test_a_rollback_of_a_task_that_never_began_changes_nothing(store: TaskStore) -> None:
    earlier = _record()
    await store.create(earlier)
    await _step(store, earlier, {"memory": _said("kept")}, status=TaskStatus.SUCCEEDED)
    before = await _session(store)
    queued = _record()
    await store.create(queued)  # holds the session; its first step has not run
    created = await store.create(_record(), busy="rollback")
    assert created.displaced == queued.id and created.holds_session
    assert await _session(store) == before
    late = await store.begin_step(queued.id, 0, T, S, {"memory": 0}, "0")
    assert late is not None and not late.current  # its step, when it comes, does nothing


@pytest.mark.parametrize("held", [0, 2, 3, 5])  # none, some, all, more than left (rewritten)
async def test_a_rollback_counts_a_list_as_the_first_step_read_it(
    store: TaskStore, held: int
) -> None:
    # The mark takes a memory's length from the first step's read of it, from `held` on.
    earlier = _record()
    await store.create(earlier)
    await _step(store, earlier, {"memory": _said("m1", "m2", "m3")}, status=TaskStatus.SUCCEEDED)
    before = await _session(store)
    doomed = _record()
    await store.create(doomed)
    epoch = await store.r.get(keys.session_epoch(T, S)) or "0"
    running = await _begin(store, doomed, held=held, epoch=epoch)
    commit = StepCommit(running, TaskStatus.WAITING_TOOLS, {"memory": _said("d1")})
    assert (await store.commit_step(commit))[0]
    await store.create(_record(), busy="rollback")
    assert await _session(store) == before


async def test_an_ended_holder_leaves_nothing_to_roll_back(store: TaskStore) -> None:
    holder = _record()
    await store.create(holder)
    await _step(store, holder, {"memory": _said("kept")})
    # It ended between two steps and still holds the lock: what it did stays.
    await store.r.hset(keys.task(holder.id), "status", TaskStatus.SUCCEEDED.value)
    before = await _session(store)
    over = await store.create(_record(), busy="rollback")
    assert over.holds_session and over.displaced is None
    assert await _session(store) == before


async def test_the_new_tasks_own_steps_are_what_a_later_rollback_removes(
    store: TaskStore,
) -> None:
    first = _record()
    await store.create(first)
    await _step(store, first, {"memory": _said("a")})
    second = _record()
    await store.create(second, busy="interrupt")  # "a" stays
    await _step(store, second, {"memory": _said("b")})
    third = _record()
    await store.create(third, busy="rollback")  # "b" goes, "a" stays
    assert [m.content for m in await store.memory(T, S)] == ["a"]


async def test_a_free_session_or_an_ended_holder_displaces_nothing(store: TaskStore) -> None:
    alone = await store.create(_record(), busy="rollback")
    assert alone.holds_session and alone.displaced is None
    holder = await store.get(alone.task_id)
    assert holder is not None
    # Its task ended but still holds the lock (it ended between two steps): taken over as is.
    await store.r.hset(keys.task(holder.id), "status", TaskStatus.SUCCEEDED.value)
    over = await store.create(_record(), busy="interrupt")
    assert over.holds_session and over.displaced is None
    assert (await store.get(holder.id)) == holder.model_copy(
        update={"status": TaskStatus.SUCCEEDED}
    )


async def test_a_retried_create_still_names_the_task_it_displaced(store: TaskStore) -> None:
    running = _record()
    await store.create(running)
    new = _record()
    first = await store.create(new, busy="interrupt", idempotency_key="k", fingerprint="f")
    again = await store.create(new, busy="interrupt")  # the same record: its reply was lost
    assert first.displaced == again.displaced == running.id
    kinds = [e.kind for e in await store.events(running.id)]
    assert kinds.count(EventKind.STATUS) == 2  # queued, cancelled: ended once
