"""The fork's store script (`sessions/fork_session.lua`) on a real Redis: every memory list of
the agent tree, the values and the compaction copied under the new session's names, its epoch
moved on, the fork job sent to the live holder of the source's interpreter (and only there),
and the refusals, each before anything is written."""

from __future__ import annotations

from store_support import broker_queue

from taskyard.agentkit.schema import AgentMessage
from taskyard.plumbing import keys
from taskyard.runtime.jobs import Envelope
from taskyard.runtime.store import StepCommit, TaskStore
from taskyard.runtime.store.sessions import SessionCopy, copy_session
from taskyard.runtime.task import TaskRecord, TaskStatus

T = "acme"
JOB = Envelope("tools.IPythonInterpreter", "the fork job", keys.session_key(T, "a"))


async def _committed(store: TaskStore) -> TaskRecord:
    """Session a after one task: two memories of the agent tree, a value, a compaction."""
    record = TaskRecord(tenant=T, session_id="a", input="hi")
    await store.create(record)
    said = {"memory": [AgentMessage(content="hi")], "critic.memory": [AgentMessage(content="ok")]}
    commit = StepCommit(record, TaskStatus.SUCCEEDED, said, [], values={"n": "1"},
                        fields={"result": "done"})  # fmt: skip
    assert (await store.commit_step(commit))[0]
    await store.r.hset(keys.session_compaction(T, "a"), mapping={"upto": "1", "summary": "{}"})
    return record


async def test_the_copy_has_every_part_under_its_own_names(
    store: TaskStore, redis_server: str
) -> None:
    await _committed(store)
    assert await copy_session(store, T, "a", "b", JOB) == SessionCopy("forked", job_sent=False)
    r = store.r
    assert await r.smembers(keys.session_paths(T, "b")) == {
        keys.session_memory(T, "b"), keys.session_memory(T, "b", "critic.memory"),
    }  # fmt: skip
    for path in ("memory", "critic.memory"):
        copied = await r.lrange(keys.session_memory(T, "b", path), 0, -1)
        assert copied == await r.lrange(keys.session_memory(T, "a", path), 0, -1) != []
    assert await r.hgetall(keys.session_values(T, "b")) == {"n": "1"}
    assert await r.hgetall(keys.session_compaction(T, "b")) == {"upto": "1", "summary": "{}"}
    assert await r.get(keys.session_origin(T, "b")) == "a"
    assert await r.get(keys.session_epoch(T, "b")) == "1"
    assert await r.zscore(keys.tenant_sessions(T), "b") is not None
    assert not await r.exists(keys.session_tasks(T, "b"))  # a's tasks stay a's
    assert broker_queue(redis_server, JOB.queue) == []  # no holder: nothing sent


async def test_the_job_goes_to_the_live_holder_of_the_interpreter(
    store: TaskStore, redis_server: str
) -> None:
    await _committed(store)
    queue = keys.tool_worker_queue("w1")
    await store.r.hset(keys.session_sandbox(keys.session_key(T, "a")),
                       mapping={"node": "w1", "incarnation": "i1", "state": "live",
                                "queue": queue})  # fmt: skip
    await store.r.set(keys.tool_worker_alive("w1"), "i1")
    assert await copy_session(store, T, "a", "b", JOB) == SessionCopy("forked", job_sent=True)
    assert broker_queue(redis_server, queue) == ["the fork job"]
    assert broker_queue(redis_server, JOB.queue) == []


async def test_refusals_write_nothing(store: TaskStore) -> None:
    assert await copy_session(store, T, "a", "b", JOB) == SessionCopy("missing")
    record = await _committed(store)
    await store.r.rpush(keys.session_memory(T, "c"), "{}")
    assert await copy_session(store, T, "a", "c", JOB) == SessionCopy("exists")
    assert await copy_session(store, T, "a", "a", JOB) == SessionCopy("exists")
    await store.create(later := TaskRecord(tenant=T, session_id="a", input="again"))
    busy = SessionCopy("busy", task_id=later.id, task_status="queued")
    assert await copy_session(store, T, "a", "b", JOB) == busy
    assert record.id != later.id
    assert not await store.r.exists(keys.session_origin(T, "b"), keys.session_memory(T, "b"))
