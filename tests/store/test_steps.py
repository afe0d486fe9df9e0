"""Steps in the store against a real Redis: begin reads what is new, a commit applies once
with the jobs it starts, an ended task takes no more."""

from __future__ import annotations

import redis
from store_support import broker_queue, created, new_record, tool_result

from taskyard.agentkit.schema import AgentMessage, ToolCall
from taskyard.plumbing import keys
from taskyard.runtime.jobs import Envelope
from taskyard.runtime.store import StepCommit, TaskStore
from taskyard.runtime.task import TaskStatus


async def test_commit_step_applies_once(store: TaskStore) -> None:
    record = await created(store)
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
    record = await created(store)
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
    record = await created(store)
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
    record = await created(store)
    assert await store.save_compaction(record, 3, summary)
    whole = await store.begin_step(record.id, 0, "acme", "s1", {"memory": 0}, "0")
    assert whole is not None and whole.compaction == (3, summary)
    tail = await store.begin_step(record.id, 0, "acme", "s1", {"memory": 5}, "0")
    assert tail is not None and tail.compaction is None  # a warm agent has it already


def _rpush(client: redis.Redis, messages: list[AgentMessage]) -> None:
    client.rpush(keys.session_memory("acme", "s1"), *(m.model_dump_json() for m in messages))


async def test_an_ended_task_takes_no_more_results_or_steps(store: TaskStore) -> None:
    record = await created(store)
    assert await store.end(record, TaskStatus.CANCELLED, error="cancelled by the client")
    late_start = await store.begin_step(record.id, 0, "acme", "s1", {"memory": 0}, "0")
    assert late_start is not None and not late_start.current and not late_start.began
    late = StepCommit(record, TaskStatus.SUCCEEDED, fields={"result": "late"})
    assert await store.commit_step(late) == (False, None)
    stored = await store.put_tool_result(record.id, 0, "a", tool_result("a"))
    assert not stored.live and not await store.r.hexists(keys.task_tool_results(record.id, 0), "a")
    ended = await store.get(record.id)
    assert ended is not None and ended.status == TaskStatus.CANCELLED and ended.result is None
    assert (await store.end(record, TaskStatus.FAILED))[0] is False  # ended stays ended


async def test_jobs_go_to_the_broker_with_their_write_only(
    store: TaskStore, redis_server: str
) -> None:
    redis.Redis.from_url(f"{redis_server}/1").flushdb()
    first, second = new_record(), new_record()
    await store.create(first, Envelope("q", "first step"))
    await store.create(second, Envelope("q", "second, waiting: not pushed"))
    assert broker_queue(redis_server, "q") == ["first step"]
    calls = [ToolCall(id="a", name="T").model_dump(mode="json")]
    commit = StepCommit(first, TaskStatus.WAITING_TOOLS, fields={"pending_calls": calls},
                        jobs=[Envelope("tools.T", "call a")])  # fmt: skip
    assert (await store.commit_step(commit))[0]
    assert not (await store.commit_step(commit))[0]  # a duplicate pushes nothing either
    assert broker_queue(redis_server, "tools.T") == ["call a"]
    again = Envelope("q", "step 1")
    await store.put_tool_result(first.id, 0, "a", tool_result("a"), again)
    await store.put_tool_result(first.id, 0, "a", tool_result("a"), again)  # redelivered
    assert broker_queue(redis_server, "q") == ["step 1", "first step"]  # newest first
    assert await store.r.exists("q") == 0  # nothing landed in the store's database
