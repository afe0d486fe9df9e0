"""The Redis store against a real Redis: task record, event stream, memory, step commits."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import redis

from shared.events import EventKind
from shared.schema import ActionReturn, AgentMessage
from shared.spec import AgentSpec
from shared.store import StepConflict, TaskStore
from shared.task import TaskRecord, TaskStatus


@pytest.fixture
def store(redis_client: redis.Redis) -> TaskStore:
    return TaskStore(redis_client)


def _record(**kw: object) -> TaskRecord:
    return TaskRecord(tenant="acme", session_id="s1", input="hi", **kw)


def test_task_record_written_and_read_back(store: TaskStore) -> None:
    record = store.create(_record())
    assert store.get(record.id) == record
    assert store.get("task_missing") is None


def test_create_is_idempotent_per_key(store: TaskStore) -> None:
    first = store.create(_record(), idempotency_key="k1")
    second = store.create(_record(), idempotency_key="k1")
    third = store.create(_record(), idempotency_key="k2")
    assert second.id == first.id
    assert third.id != first.id


def test_event_stream_round_trip_and_resume(store: TaskStore) -> None:
    record = store.create(_record())
    msg = AgentMessage(sender="assistant", content="x", formatted={"tool_calls": []})
    store.publish(record.id, EventKind.MESSAGE, msg.model_dump(mode="json"))
    store.set_status(record.id, TaskStatus.SUCCEEDED)
    events = store.events(record.id)
    assert [e.kind for e in events] == [EventKind.STATUS, EventKind.MESSAGE, EventKind.STATUS]
    assert events[-1].is_final and not events[0].is_final
    assert store.messages(record.id) == [msg]
    assert store.events(record.id, after=events[0].id) == events[1:]


def test_commit_step_applies_once(store: TaskStore) -> None:
    record = store.create(_record())
    user = AgentMessage(content="hi")
    reply = AgentMessage(sender="assistant", content="hello")
    usage = {"prompt_tokens": 12, "completion_tokens": 3}
    store.commit_step(record, [user, reply], TaskStatus.SUCCEEDED, [reply], usage, result="hello")
    with pytest.raises(StepConflict):
        store.commit_step(record, [user, reply], TaskStatus.SUCCEEDED, [reply], usage, result="x")
    after = store.get(record.id)
    assert after is not None and after.step == 1 and after.result == "hello"
    assert (after.prompt_tokens, after.completion_tokens) == (12, 3)  # counted once
    assert store.memory("acme", "s1") == [user, reply]


def test_tool_results_keep_call_order_and_first_write(store: TaskStore) -> None:
    record = store.create(_record())
    a = AgentMessage(sender="T", content=ActionReturn(type="T"), extra_info={"tool_call_id": "a"})
    b = AgentMessage(sender="T", content="b", extra_info={"tool_call_id": "b"})
    assert store.put_tool_result(record.id, 0, "b", b) == 1
    assert store.put_tool_result(record.id, 0, "a", a) == 2
    assert store.put_tool_result(record.id, 0, "a", b) == 2  # a redelivery does not overwrite
    assert store.tool_results(record.id, 0, ["a", "b"]) == [a, b]
    assert store.claim_advance(record.id, 0) and not store.claim_advance(record.id, 0)


def test_session_is_held_by_one_task_and_handed_over(store: TaskStore) -> None:
    first, second = store.create(_record()), store.create(_record())
    assert store.claim_session(first)
    assert not store.claim_session(second)
    assert store.session_busy(second)
    assert store.release_session(first) == second.id
    assert store.release_session(second) is None
    assert not store.session_busy(first)


def test_spec_keeps_only_the_fields_the_task_set(store: TaskStore) -> None:
    record = store.create(_record(spec=AgentSpec(agent="unit_expert")))
    stored = store.get(record.id)
    assert stored is not None
    assert stored.spec.model_fields_set == {"agent"}


def test_claim_racing_a_release_never_strands_a_task(store: TaskStore) -> None:
    # Whatever the interleaving, the second task ends up holding the session, never waiting
    # behind a lock nobody holds.
    for _ in range(200):
        first, second = _record(), _record()
        assert store.claim_session(first)
        with ThreadPoolExecutor(2) as pool:
            claimed = pool.submit(store.claim_session, second)
            handed = pool.submit(store.release_session, first)
        assert claimed.result() or handed.result() == second.id
        assert store.session_busy(first)  # held by `second`
        assert store.release_session(second) is None


def test_an_ended_task_stays_ended(store: TaskStore) -> None:
    record = store.create(_record())
    assert store.set_status(record.id, TaskStatus.CANCELLED, error="cancelled by the client")
    assert not store.set_status(record.id, TaskStatus.RUNNING)
    with pytest.raises(StepConflict):  # a step in flight when the task was cancelled
        store.commit_step(record, [], TaskStatus.SUCCEEDED, result="late")
    ended = store.get(record.id)
    assert ended is not None and ended.status == TaskStatus.CANCELLED and ended.result is None
