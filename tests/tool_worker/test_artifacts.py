"""A tool result's artifacts leave the message before it is stored: files of the task, an
`artifact` event each (before the result), a URL in the message; what the worker cannot
check or keep is dropped and the model is told. On a real Redis."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from services.tool_worker import worker
from services.tool_worker.artifacts import ArtifactKeeper
from shared.events import EventKind
from shared.files.artifacts import ArtifactStore, artifact_name
from shared.jobs import ToolRunJob
from shared.schema import ActionReturn, AgentMessage, Artifact, ToolCall
from shared.settings import Settings
from shared.task import TaskRecord

CALL = ToolCall(id="c1", name="IPythonInterpreter", parameters={"command": "plot()"})
PNG = b"\x89PNG fake figure"


@pytest.fixture
def shared(redis_server: str, redis_client: redis.Redis) -> Iterator[worker._Store]:
    shared = worker._Store(Settings(redis_url=f"{redis_server}/0"))
    yield shared
    shared.loop.run(shared.store.close())
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


def _keeper(shared: worker._Store, root: Path, task_max: int = 1 << 20) -> ArtifactKeeper:
    return ArtifactKeeper(ArtifactStore(root), shared._publish, task_max)


def test_artifacts_become_files_events_and_urls(
    shared: worker._Store, job: ToolRunJob, tmp_path: Path
) -> None:
    artifact = _artifact()
    kept = _keeper(shared, tmp_path).keep(job, _result(artifact))
    ret = kept.content
    assert isinstance(ret, ActionReturn) and ret.artifacts is not None
    (stored,) = ret.artifacts
    assert stored.data is None
    assert stored.url == f"/v1/tasks/{job.task_id}/artifacts/{artifact.name}"
    assert (tmp_path / job.task_id / artifact.name).read_bytes() == PNG
    (event,) = [e for e in shared.loop.run(shared.store.events(job.task_id))
                if e.kind == EventKind.ARTIFACT]  # fmt: skip
    assert event.data == {**stored.model_dump(exclude={"data"}), "call_id": "c1", "step": 0}
    assert artifact.data not in kept.model_dump_json()  # no bytes go on to Redis with it
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
    shared: worker._Store, job: ToolRunJob, tmp_path: Path, bad: dict, why: str
) -> None:
    kept = _keeper(shared, tmp_path).keep(job, _result(_artifact(**bad)))
    ret = kept.content
    assert isinstance(ret, ActionReturn) and ret.artifacts is None
    assert why in ret.format_result()
    assert not (tmp_path / job.task_id).exists() or not any((tmp_path / job.task_id).iterdir())


def test_a_task_keeps_at_most_its_budget(
    shared: worker._Store, job: ToolRunJob, tmp_path: Path
) -> None:
    first, second = _artifact(b"a" * 600), _artifact(b"b" * 600)
    kept = _keeper(shared, tmp_path, task_max=1000).keep(job, _result(first, second))
    ret = kept.content
    assert isinstance(ret, ActionReturn)
    assert [a.name for a in ret.artifacts or []] == [first.name]
    assert f"[{second.name} was not kept: the task's artifacts would pass 1.0 kB" in (
        ret.format_result()
    )


def test_a_store_that_fails_leaves_the_result_without_its_artifacts(
    shared: worker._Store, job: ToolRunJob, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "file").touch()  # the artifact directory cannot be made under a file
    monkeypatch.setattr(shared, "artifacts", _keeper(shared, tmp_path / "file"))
    kept = worker._keep_artifacts(shared, job, _result(_artifact()))
    ret = kept.content
    assert isinstance(ret, ActionReturn) and ret.artifacts is None
    assert "could not be kept" in ret.format_result()
