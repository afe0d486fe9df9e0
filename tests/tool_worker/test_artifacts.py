"""A tool result's artifacts leave the message before it is stored: kept in the artifact store
(the Redis backend here; the store's own contract is tests/files/test_artifact_store.py), an
`artifact` event each (before the result), a URL in the message; what the worker cannot check
or keep is dropped and the model is told. On a real Redis."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest
import redis

from devstack.procs import free_port
from services.tool_worker import worker
from services.tool_worker.artifacts import ArtifactKeeper
from shared.events import EventKind
from shared.files.artifacts import (
    ArtifactLimits,
    ArtifactStoreUnavailable,
    Expiry,
    RedisArtifactStore,
    artifact_name,
)
from shared.jobs import ToolRunJob
from shared.schema import ActionReturn, AgentMessage, Artifact, ToolCall
from shared.settings import ToolWorkerSettings
from shared.task import TaskRecord

CALL = ToolCall(id="c1", name="IPythonInterpreter", parameters={"command": "plot()"})
PNG = b"\x89PNG fake figure"
LIMITS = ArtifactLimits(artifact_max_bytes=1 << 20, task_max_bytes=1 << 20)


@pytest.fixture
def shared(redis_server: str, redis_client: redis.Redis) -> Iterator[worker._Store]:
    shared = worker._Store(ToolWorkerSettings(redis_url=f"{redis_server}/0"))
    yield shared
    shared.loop.run(shared.store.close())
    shared.loop.run(shared.artifact_store.close())
    shared.loop.close()


@pytest.fixture
def job(shared: worker._Store) -> ToolRunJob:
    record = TaskRecord(tenant="t", session_id="s", input="plot it")
    shared.loop.run(shared.store.create(record))
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
    shared: worker._Store, job: ToolRunJob, message: AgentMessage, **limits: int
) -> AgentMessage:
    """`message` through a keeper whose store has these limits (else the settings')."""
    store = shared.artifact_store
    if limits:
        assert isinstance(store, RedisArtifactStore)
        store = RedisArtifactStore(store.r, ArtifactLimits(**limits))
    return shared.loop.run(ArtifactKeeper(store, shared.store.publish).keep(job, message))


def test_artifacts_go_to_the_store_and_become_events_and_urls(
    shared: worker._Store, job: ToolRunJob
) -> None:
    artifact = _artifact()
    kept = _keep(shared, job, _result(artifact))
    ret = kept.content
    assert isinstance(ret, ActionReturn) and ret.artifacts is not None
    (stored,) = ret.artifacts
    assert stored.data is None
    assert stored.url == f"/v1/tasks/{job.task_id}/artifacts/{artifact.name}"
    body = shared.loop.run(shared.artifact_store.open(job.task_id, artifact.name))
    assert body is not None and body.data == PNG
    (event,) = [e for e in shared.loop.run(shared.store.events(job.task_id))
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
    shared: worker._Store, job: ToolRunJob, bad: dict, why: str
) -> None:
    kept = _keep(shared, job, _result(_artifact(**bad)))
    ret = kept.content
    assert isinstance(ret, ActionReturn) and ret.artifacts is None
    assert why in ret.format_result()
    assert shared.loop.run(shared.artifact_store.task_artifacts(job.task_id)) == []
    assert _artifact_events(shared, job) == []


def test_what_the_store_refuses_is_dropped_and_said(shared: worker._Store, job: ToolRunJob) -> None:
    first, second, big = _artifact(b"a" * 600), _artifact(b"b" * 600), _artifact(b"c" * 900)
    message = _result(first, big, second)
    kept = _keep(shared, job, message, artifact_max_bytes=800, task_max_bytes=1000)
    ret = kept.content
    assert isinstance(ret, ActionReturn)
    assert [a.name for a in ret.artifacts or []] == [first.name]
    text = ret.format_result()
    assert f"[{big.name} was not kept: it is 900 B, over the 800 B one artifact may be" in text
    assert f"[{second.name} was not kept: the task's artifacts would pass 1.0 kB" in text
    assert [e["name"] for e in _artifact_events(shared, job)] == [first.name]


def test_a_store_that_fails_leaves_the_result_without_its_artifacts(
    shared: worker._Store, job: ToolRunJob, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed = RedisArtifactStore.from_url(f"redis://127.0.0.1:{free_port()}/0", LIMITS)
    monkeypatch.setattr(shared, "artifacts", ArtifactKeeper(closed, shared.store.publish))
    kept = worker._keep_artifacts(shared, job, _result(_artifact()))
    ret = kept.content
    assert isinstance(ret, ActionReturn) and ret.artifacts is None
    assert "[its figures and tables could not be kept (ArtifactStoreUnavailable)]" in (
        ret.format_result()
    )
    assert _artifact_events(shared, job) == []


def test_the_worker_says_how_artifacts_expire(
    shared: worker._Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(worker, "_store", shared)
    with caplog.at_level("INFO", "taskyard.tool_worker"):
        worker._say_artifact_expiry()
    assert "artifacts (redis backend): each task's artifacts expire 7 days after" in caplog.text
    silent = Expiry(None, "no lifecycle rule of the bucket expires s3://b/p/")
    gone = ArtifactStoreUnavailable("the artifact store (S3) failed: refused")
    for answer, said in ((silent, silent.how), (gone, str(gone))):
        monkeypatch.setattr(shared, "artifact_store", _Expiring(answer))
        caplog.clear()
        with caplog.at_level("INFO", "taskyard.tool_worker"):
            worker._say_artifact_expiry()
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


def _artifact_events(shared: worker._Store, job: ToolRunJob) -> list[dict]:
    events = shared.loop.run(shared.store.events(job.task_id))
    return [e.data for e in events if e.kind == EventKind.ARTIFACT]
