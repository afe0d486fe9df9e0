"""A tool result's artifacts leave the message before it is stored: kept in the artifact store
(the Redis backend here; the store's own contract is tests/files/test_artifact_store.py), an
`artifact` event each (before the result), a URL in the message; what the worker cannot check
or keep is dropped and the model is told. On a real Redis."""

from __future__ import annotations

import base64

import pytest

from devstack.procs import free_port
from services.tool_worker.artifacts import ArtifactKeeper
from services.tool_worker.call_runner import ToolCallRunner
from taskyard.agentkit.schema import ActionReturn, AgentMessage, Artifact, ToolCall
from taskyard.files.artifacts import (
    ArtifactLimits,
    ArtifactStoreUnavailable,
    Expiry,
    RedisArtifactStore,
    artifact_name,
)
from taskyard.runtime.events import EventKind
from taskyard.runtime.jobs import ToolRunJob
from taskyard.runtime.task import TaskRecord

CALL = ToolCall(id="c1", name="IPythonInterpreter", parameters={"command": "plot()"})
PNG = b"\x89PNG fake figure"
LIMITS = ArtifactLimits(artifact_max_bytes=1 << 20, task_max_bytes=1 << 20)


@pytest.fixture
def job(runner: ToolCallRunner) -> ToolRunJob:
    record = TaskRecord(tenant="t", session_id="s", input="plot it")
    runner.loop.run(runner.store.create(record))
    return ToolRunJob(task_id=record.id, step=0, tenant="t", session_id="s", call=CALL)


def _artifact(content: bytes = PNG, **changes: object) -> Artifact:
    name = artifact_name("figure", "image/png", content)
    fields = {"name": name, "mime": "image/png", "kind": "figure", "size": len(content),
              "width": 640, "height": 480, "data": base64.b64encode(content).decode()}  # fmt: skip
    return Artifact.model_validate({**fields, **changes})


def _result(*artifacts: Artifact) -> AgentMessage:
    text = "\n".join(a.describe() for a in artifacts)
    ret = ActionReturn(type=CALL.name, result=[{"type": "text", "content": text}],
                       artifacts=list(artifacts))  # fmt: skip
    return AgentMessage.tool_result(CALL, ret)


def _keep(
    runner: ToolCallRunner, job: ToolRunJob, message: AgentMessage, **limits: int
) -> AgentMessage:
    """`message` through a keeper whose store has these limits (else the settings')."""
    store = runner.artifacts.store
    if limits:
        assert isinstance(store, RedisArtifactStore)
        store = RedisArtifactStore(store.r, ArtifactLimits(**limits))
    return runner.loop.run(ArtifactKeeper(store, runner.store.publish).keep(job, message))


def test_artifacts_go_to_the_store_and_become_events_and_urls(
    runner: ToolCallRunner, job: ToolRunJob
) -> None:
    artifact = _artifact()
    kept = _keep(runner, job, _result(artifact))
    ret = kept.content
    assert isinstance(ret, ActionReturn) and ret.artifacts is not None
    (stored,) = ret.artifacts
    assert stored.data is None
    assert stored.url == f"/v1/tasks/{job.task_id}/artifacts/{artifact.name}"
    body = runner.loop.run(runner.artifacts.store.open(job.task_id, artifact.name))
    assert body is not None and body.data == PNG
    (event,) = [e for e in runner.loop.run(runner.store.events(job.task_id))
                if e.kind == EventKind.ARTIFACT]  # fmt: skip
    assert event.data == {**stored.model_dump(exclude={"data"}), "call_id": "c1", "step": 0}
    assert artifact.data not in kept.model_dump_json()  # no bytes go on with the message
    assert ret.format_result() == artifact.describe()


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ({"data": "not base64!"}, "its data is not base64"),
        ({"size": 3}, "not the 3 it says"),
        ({"name": "../../etc/passwd"}, "not an artifact name"),
    ],
)
def test_what_the_worker_cannot_check_is_dropped_and_said(
    runner: ToolCallRunner, job: ToolRunJob, bad: dict, why: str
) -> None:
    kept = _keep(runner, job, _result(_artifact(**bad)))
    ret = kept.content
    assert isinstance(ret, ActionReturn) and ret.artifacts is None
    assert why in ret.format_result()
    assert runner.loop.run(runner.artifacts.store.task_artifacts(job.task_id)) == []
    assert _artifact_events(runner, job) == []


def test_what_the_store_refuses_is_dropped_and_said(
    runner: ToolCallRunner, job: ToolRunJob
) -> None:
    first, second, big = _artifact(b"a" * 600), _artifact(b"b" * 600), _artifact(b"c" * 900)
    message = _result(first, big, second)
    kept = _keep(runner, job, message, artifact_max_bytes=800, task_max_bytes=1000)
    ret = kept.content
    assert isinstance(ret, ActionReturn)
    assert [a.name for a in ret.artifacts or []] == [first.name]
    text = ret.format_result()
    assert f"[{big.name} was not kept: it is 900 B, over the 800 B one artifact may be" in text
    assert f"[{second.name} was not kept: the task's artifacts would pass 1.0 kB" in text
    assert [e["name"] for e in _artifact_events(runner, job)] == [first.name]


def test_a_store_that_fails_leaves_the_result_without_its_artifacts(
    runner: ToolCallRunner, job: ToolRunJob, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed = RedisArtifactStore.from_url(f"redis://127.0.0.1:{free_port()}/0", LIMITS)
    monkeypatch.setattr(runner, "artifacts", ArtifactKeeper(closed, runner.store.publish))
    kept = runner.keep_artifacts(job, _result(_artifact()))
    ret = kept.content
    assert isinstance(ret, ActionReturn) and ret.artifacts is None
    assert "[its figures and tables could not be kept (ArtifactStoreUnavailable)]" in (
        ret.format_result()
    )
    assert _artifact_events(runner, job) == []


def test_the_worker_says_how_artifacts_expire(
    runner: ToolCallRunner, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("INFO", "taskyard.tool_worker"):
        runner.say_artifact_expiry()
    assert "artifacts (redis backend): each task's artifacts expire 7 days after" in caplog.text
    silent = Expiry(None, "no lifecycle rule of the bucket expires s3://b/p/")
    gone = ArtifactStoreUnavailable("the artifact store (S3) failed: refused")
    for answer, said in ((silent, silent.how), (gone, str(gone))):
        monkeypatch.setattr(runner.artifacts, "store", _Expiring(answer))
        caplog.clear()
        with caplog.at_level("INFO", "taskyard.tool_worker"):
            runner.say_artifact_expiry()
        (record,) = caplog.records
        assert record.levelname == "WARNING" and said in record.getMessage()


class _Expiring:
    """A store whose only answer is how it expires (or that it does not answer)."""

    def __init__(self, expiry: Expiry | Exception) -> None:
        self._expiry = expiry

    async def expiry(self) -> Expiry:
        if isinstance(self._expiry, Exception):
            raise self._expiry
        return self._expiry


def _artifact_events(runner: ToolCallRunner, job: ToolRunJob) -> list[dict]:
    events = runner.loop.run(runner.store.events(job.task_id))
    return [e.data for e in events if e.kind == EventKind.ARTIFACT]
