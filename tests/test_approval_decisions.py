"""Approval decisions on a real Redis: a held call waits, an approval sends it (as edited), a
denial becomes its result and may complete the step; deciding twice or the unknown does
nothing."""

from __future__ import annotations

import base64
import json

import pytest
import redis
from celery import Celery

from taskyard.agentkit.schema import ActionReturn, AgentMessage, ToolCall
from taskyard.agentkit.spec import AgentSpec, ApprovalPolicy
from taskyard.plumbing import keys
from taskyard.plumbing.celery_app import make_celery
from taskyard.plumbing.settings import AgentWorkerSettings
from taskyard.runtime.approvals import Decision, Outcome, decide
from taskyard.runtime.events import EventKind
from taskyard.runtime.jobs import AgentStepJob, ToolRunJob, envelope
from taskyard.runtime.store import StepCommit, TaskStore
from taskyard.runtime.task import TaskRecord, TaskStatus

CODE = ToolCall(id="c1", name="IPythonInterpreter", parameters={"command": "print(1)"})
SEARCH = ToolCall(id="c2", name="WebBrowser.search", parameters={"query": "x"})


@pytest.fixture
def celery(redis_server: str) -> Celery:
    return make_celery(AgentWorkerSettings(redis_url=f"{redis_server}/0"))


def _queued(redis_server: str, queue: str) -> list[dict]:
    broker = redis.Redis.from_url(f"{redis_server}/1")
    raw = [json.loads(m) for m in reversed(broker.lrange(queue, 0, -1))]
    return [json.loads(base64.b64decode(m["body"]))[0][0] for m in raw]


async def _held(store: TaskStore, celery: Celery) -> TaskRecord:
    """A task whose step 0 called the code tool (held for approval) and a search (sent)."""
    policy = ApprovalPolicy(tools=["IPythonInterpreter"])
    record = TaskRecord(tenant="t", session_id="s", input="hi", spec=AgentSpec(approval=policy))
    await store.create(record)
    search_job = ToolRunJob(task_id=record.id, step=0, tenant="t", session_id="s", call=SEARCH)
    commit = StepCommit(
        record, TaskStatus.WAITING_APPROVAL,
        fields={"pending_calls": [c.model_dump(mode="json") for c in (CODE, SEARCH)]},
        jobs=[envelope(celery, search_job)], held=[CODE],
        events=[(EventKind.APPROVAL_REQUESTED, {"step": 0, "calls": [{"id": "c1"}]})],
    )  # fmt: skip
    assert (await store.commit_step(commit))[0]
    record.step, record.status = 1, TaskStatus.WAITING_APPROVAL
    return record


def _result(call: ToolCall) -> AgentMessage:
    return AgentMessage.tool_result(call, ActionReturn(type=call.name, result=[]))


async def test_an_approval_sends_the_call_as_edited(
    store: TaskStore, celery: Celery, redis_server: str
) -> None:
    record = await _held(store, celery)
    assert [j["call"]["id"] for j in _queued(redis_server, "tools.WebBrowser")] == ["c2"]
    assert _queued(redis_server, "tools.IPythonInterpreter") == []  # held
    edited = Decision(decision="approve", arguments={"command": "print(2)"})
    assert await decide(store, celery, record, "c1", edited) == Outcome.APPROVED
    [sent] = _queued(redis_server, "tools.IPythonInterpreter")
    assert sent["call"]["parameters"] == {"command": "print(2)"}
    after = await store.get(record.id)
    assert after is not None and after.status == TaskStatus.WAITING_TOOLS  # none pending now
    assert await decide(store, celery, record, "c1", edited) == Outcome.DECIDED
    assert await decide(store, celery, record, "nope", edited) == Outcome.UNKNOWN
    kinds = [e.kind for e in await store.events(record.id)]
    assert EventKind.APPROVAL_REQUESTED in kinds and EventKind.APPROVAL_DECIDED in kinds


async def test_a_denial_is_the_calls_result_and_can_complete_the_step(
    store: TaskStore, celery: Celery, redis_server: str
) -> None:
    record = await _held(store, celery)
    nxt = envelope(celery, AgentStepJob(task_id=record.id, step=1, tenant="t", session_id="s"))
    stored = await store.put_tool_result(record.id, 0, "c2", _result(SEARCH), nxt)
    assert not stored.advance  # the held call has no result yet
    denied = Decision(decision="deny", reason="not on a Friday")
    assert await decide(store, celery, record, "c1", denied) == Outcome.DENIED
    [result] = await store.tool_results(record.id, 0, [CODE])
    assert isinstance(result.content, ActionReturn)
    assert result.content.errmsg == "A person denied this call: not on a Friday"
    assert [j["step"] for j in _queued(redis_server, "agent")] == [1]  # the step goes on


async def test_a_decision_on_an_ended_task_changes_nothing(
    store: TaskStore, celery: Celery
) -> None:
    record = await _held(store, celery)
    await store.end(record, TaskStatus.CANCELLED)
    assert await decide(store, celery, record, "c1", Decision(decision="deny")) == Outcome.UNKNOWN
    assert await store.tool_results(record.id, 0, [CODE]) == []


async def test_held_calls_with_a_timeout_are_listed_for_the_sweep(
    store: TaskStore, celery: Celery, redis_client: redis.Redis
) -> None:
    policy = ApprovalPolicy(tools="*", timeout_s=60)
    record = TaskRecord(tenant="t", session_id="s", input="hi", spec=AgentSpec(approval=policy))
    await store.create(record)
    commit = StepCommit(record, TaskStatus.WAITING_APPROVAL, held=[CODE], approval_timeout_s=60,
                        fields={"pending_calls": [CODE.model_dump(mode="json")]})  # fmt: skip
    await store.commit_step(commit)
    assert await store.undecided(now=1e12) == [(record.id, 0, "c1")]
    assert await store.undecided(now=0) == []
    assert redis_client.zscore(keys.APPROVAL_DEADLINES, f"{record.id}|0|c1") is not None
