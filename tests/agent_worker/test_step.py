"""The agent step's orchestration on a real Redis and the scripted model over HTTP: commits
once, dispatches tool calls, resumes a dispatch a crash cut short, ends runaway tasks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from services.agent_worker.step import StepRunner
from services.scripted_model import ScriptedModelThread
from shared.events import EventKind
from shared.schema import ActionReturn, AgentMessage, ToolCall
from shared.settings import Settings
from shared.spec import AgentSpec
from shared.store import TaskStore
from shared.task import TaskRecord, TaskStatus

QUESTION = "What is the square root of 2, to 12 decimal places? Use Python."


class Recorder:
    """Stands in for Celery: records what the step would send."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, ToolCall]] = []
        self.steps: list[tuple[str, int]] = []

    def dispatch(self, record: TaskRecord, step: int, call: ToolCall) -> None:
        self.calls.append((record.id, step, call))

    def enqueue(self, task_id: str, step: int) -> None:
        self.steps.append((task_id, step))


@pytest.fixture(scope="module")
def model_url() -> Iterator[str]:
    with ScriptedModelThread() as model:
        yield model.server.base_url


@pytest.fixture
def store(redis_client: redis.Redis) -> TaskStore:
    return TaskStore(redis_client)


@pytest.fixture
def sent() -> Recorder:
    return Recorder()


@pytest.fixture
def runner(store: TaskStore, sent: Recorder, model_url: str) -> Iterator[StepRunner]:
    settings = Settings(llm_base_url=model_url, default_max_steps=4)
    runner = StepRunner(store, settings, sent.dispatch, sent.enqueue)
    yield runner
    runner.loop.close()


def _task(store: TaskStore, **spec: object) -> TaskRecord:
    record = store.create(TaskRecord(tenant="t", session_id="s", input=QUESTION,
                                     spec=AgentSpec(**spec)))  # fmt: skip
    assert store.claim_session(record)
    return record


def _answer(store: TaskStore, record: TaskRecord, call: ToolCall) -> None:
    ret = ActionReturn(type=call.name, result=[{"type": "text", "content": "1.414213562373"}])
    msg = AgentMessage(sender=call.name, content=ret, extra_info={"tool_call_id": call.id})
    store.put_tool_result(record.id, 0, call.id, msg)


def test_first_step_commits_and_dispatches_its_call(
    runner: StepRunner, store: TaskStore, sent: Recorder
) -> None:
    record = _task(store)
    runner.run(record.id, 0)
    after = store.get(record.id)
    assert after is not None and after.status == TaskStatus.WAITING_TOOLS and after.step == 1
    [(task_id, step, call)] = sent.calls
    assert (task_id, step, call.name) == (record.id, 0, "IPythonInterpreter")
    assert after.pending_calls == [call.id]
    assert [m.sender for m in store.memory("t", "s")] == ["user", "assistant"]
    assert any(e.kind == EventKind.TOKEN for e in store.events(record.id)) is False  # a call


def test_a_duplicate_step_changes_nothing(
    runner: StepRunner, store: TaskStore, sent: Recorder
) -> None:
    record = _task(store)
    runner.run(record.id, 0)
    runner.run(record.id, 0)  # a second delivery of the same job
    assert len(sent.calls) == 1
    assert len(store.memory("t", "s")) == 2


def test_a_redelivered_step_resends_only_missing_calls(
    runner: StepRunner, store: TaskStore, sent: Recorder
) -> None:
    record = _task(store)
    runner.run(record.id, 0)
    [(_, _, call)] = sent.calls
    runner.run(record.id, 0, redelivered=True)  # crashed after the commit, before sending?
    assert [c.id for _, _, c in sent.calls] == [call.id, call.id]
    _answer(store, record, call)
    runner.run(record.id, 0, redelivered=True)  # the result is in: nothing to resend
    assert len(sent.calls) == 2


def test_results_in_then_the_answer_ends_the_task_and_frees_the_session(
    runner: StepRunner, store: TaskStore, sent: Recorder
) -> None:
    record = _task(store)
    waiting = store.create(TaskRecord(tenant="t", session_id="s", input="next"))
    assert not store.claim_session(waiting)
    runner.run(record.id, 0)
    _answer(store, record, sent.calls[0][2])
    runner.run(record.id, 1)
    done = store.get(record.id)
    assert done is not None and done.status == TaskStatus.SUCCEEDED
    assert "1.414213562373" in (done.result or "")
    assert done.prompt_tokens > 0
    assert any(e.kind == EventKind.TOKEN for e in store.events(record.id))  # streamed answer
    assert sent.steps == [(waiting.id, 0)]  # the session passed to the waiting task


def test_max_steps_ends_a_runaway_task(
    runner: StepRunner, store: TaskStore, sent: Recorder
) -> None:
    record = _task(store, max_steps=1)
    runner.run(record.id, 0)
    _answer(store, record, sent.calls[0][2])
    runner.run(record.id, 1)
    failed = store.get(record.id)
    assert failed is not None and failed.status == TaskStatus.FAILED
    assert failed.error == "max_steps (1) reached without a final answer"
    assert not store.session_busy(TaskRecord(tenant="t", session_id="s", input="x"))
