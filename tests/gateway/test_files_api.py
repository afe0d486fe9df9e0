"""The file and artifact routes of the gateway on its own (in process, real Redis, no tool
worker): keys, the upload's own body limit, paths and session ids checked before any job,
a 504 that says why, and artifacts served from the artifact store (Redis here) only to their
task's tenant. The happy paths through a tool worker are in tests/e2e/test_session_files.py
and tests/e2e/test_rich_outputs.py."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
import redis
from fastapi.testclient import TestClient

from devstack.procs import free_port
from services.gateway.app import create_app
from services.gateway.resources.files.session_files import _refused
from taskyard.files.artifacts import (
    ArtifactLimits,
    RedisArtifactStore,
    artifact_name,
    artifact_url,
    make_artifact_store,
)
from taskyard.files.transfer import FilesReply
from taskyard.plumbing.settings import GatewaySettings
from taskyard.runtime.events import EventKind
from taskyard.runtime.jobs import SessionFilesJob
from taskyard.runtime.store import TaskStore

AUTH = {"Authorization": "Bearer key-a"}
OTHER = {"Authorization": "Bearer key-b"}
FILE_LIMIT = 100_000


@pytest.fixture
def files_settings(settings: GatewaySettings) -> GatewaySettings:
    return settings.model_copy(
        update={
            "gateway_max_body_bytes": 4096,
            "files_max_bytes": FILE_LIMIT,
            "files_timeout_s": 0.2,
        }
    )


@pytest.fixture
def client(files_settings: GatewaySettings) -> Iterator[TestClient]:
    with TestClient(create_app(files_settings)) as c:
        yield c


def _upload(
    client: TestClient, data: bytes, path: str = "in.csv", session: str = "s1"
) -> httpx.Response:
    return client.post(f"/v1/sessions/{session}/files", files={"file": ("in.csv", data)},
                       data={"path": path}, headers=AUTH)  # fmt: skip


def test_file_routes_need_a_key(client: TestClient) -> None:
    for method, url in (("POST", "/v1/sessions/s1/files"), ("GET", "/v1/sessions/s1/files"),
                        ("GET", "/v1/sessions/s1/files/a.csv"),
                        ("GET", "/v1/tasks/task_0/artifacts")):  # fmt: skip
        assert client.request(method, url).status_code == 401


def test_an_upload_has_a_body_limit_of_its_own(client: TestClient) -> None:
    # Other routes keep the small limit...
    too_big = client.post("/v1/tasks", json={"input": "x" * 5000}, headers=AUTH)
    assert too_big.status_code == 413 and "over 4096 bytes" in too_big.json()["detail"]
    # ...an upload may pass it (and then waits for a tool worker, of which there is none)...
    assert _upload(client, b"x" * 50_000).status_code == 504
    # ...up to the file limit: past it, a clear reason, the body never read past its limit.
    multipart = {**AUTH, "Content-Type": "multipart/form-data; boundary=b"}
    whole = client.post("/v1/sessions/s1/files", content=b"x" * (FILE_LIMIT + 70_000),
                        headers=multipart)  # fmt: skip
    assert whole.status_code == 413
    assert "TASKYARD_FILES_MAX_BYTES" in whole.json()["detail"]
    one_over = _upload(client, b"x" * (FILE_LIMIT + 1))
    assert one_over.status_code == 413
    assert (
        one_over.json()["detail"]
        == f"the file is over {FILE_LIMIT} bytes (TASKYARD_FILES_MAX_BYTES)"
    )


@pytest.mark.parametrize("path", ["../escape.csv", "/etc/passwd", "a/../../b", "a//b", "dir/"])
def test_an_upload_path_stays_in_the_working_directory(client: TestClient, path: str) -> None:
    answer = _upload(client, b"1", path=path)
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["loc"] == ["body", "path"]


@pytest.mark.parametrize("raw", ["%2E%2E/etc/passwd", "a/%2E%2E/%2E%2E/etc/passwd", "/etc/passwd"])
def test_a_download_path_stays_in_the_working_directory(client: TestClient, raw: str) -> None:
    answer = client.get(f"/v1/sessions/s1/files/{raw}", headers=AUTH)
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["loc"] == ["path", "path"]


def test_a_session_id_no_session_can_have(client: TestClient) -> None:
    assert client.get("/v1/sessions/bad%20id/files", headers=AUTH).status_code == 404
    assert client.get("/v1/sessions/bad%20id/files/a", headers=AUTH).status_code == 404
    created = _upload(client, b"1", session="bad%20id")
    assert created.status_code == 422 and created.json()["detail"][0]["loc"] == [
        "path",
        "session_id",
    ]


def test_without_a_tool_worker_a_504_says_why(
    client: TestClient, files_settings: GatewaySettings
) -> None:
    answer = client.get("/v1/sessions/s1/files", headers=AUTH)
    assert answer.status_code == 504
    assert "TASKYARD_FILES_TIMEOUT_S" in answer.json()["detail"]
    broker = redis.Redis.from_url(files_settings.broker_url)
    (message,) = broker.lrange("tools.IPythonInterpreter", 0, -1)
    headers = json.loads(message)["headers"]
    assert headers["task"] == "tools.files" and "files list tenant-a:s1" in headers["argsrepr"]


def test_a_task_names_files_of_its_own_session(client: TestClient) -> None:
    no_session = client.post("/v1/tasks", json={"input": "x", "files": ["a.csv"]}, headers=AUTH)
    assert no_session.status_code == 422
    outside = client.post(
        "/v1/tasks", json={"input": "x", "session_id": "s1", "files": ["../a"]}, headers=AUTH
    )
    assert outside.status_code == 422
    assert outside.json()["detail"][0]["loc"][:2] == ["body", "files"]


def test_a_405_names_every_method_of_the_path(client: TestClient) -> None:
    answer = client.delete("/v1/sessions/s1/files", headers=AUTH)
    assert answer.status_code == 405 and answer.headers["allow"] == "GET, POST"


# -- artifacts ------------------------------------------------------------------------------


@pytest.fixture
def task_with_artifacts(
    client: TestClient, files_settings: GatewaySettings
) -> tuple[str, dict[str, bytes]]:
    """A task whose tool made a PNG (twice: a redelivered job) and an HTML table, and one
    more whose artifact the store no longer keeps (expired)."""
    task_id = client.post("/v1/tasks", json={"input": "plot"}, headers=AUTH).json()["id"]
    made = {artifact_name("figure", "image/png", b"\x89PNG"): b"\x89PNG",
            artifact_name("table", "text/html", b"<table>"): b"<table>"}  # fmt: skip
    gone = artifact_name("image", "image/png", b"expired")
    events = []
    for name, data in [*made.items(), next(iter(made.items())), (gone, b"expired")]:
        mime = "image/png" if name.endswith(".png") else "text/html"
        events.append({"name": name, "mime": mime, "kind": name.split("-")[0], "size": len(data),
                       "width": None, "height": None, "url": artifact_url(task_id, name),
                       "call_id": "c1", "step": 0})  # fmt: skip

    async def publish() -> None:
        tasks = TaskStore.from_url(files_settings.redis_url, files_settings.broker_url)
        artifacts = make_artifact_store(files_settings)
        for event in events:
            if event["name"] != gone:
                await artifacts.put(task_id, event["name"], made[event["name"]])
            await tasks.publish(task_id, EventKind.ARTIFACT, event)
        await tasks.close()
        await artifacts.close()

    client.portal.call(publish)  # type: ignore[union-attr]
    return task_id, made


def test_a_tasks_artifacts_are_listed_once_each_and_served(
    client: TestClient, task_with_artifacts: tuple[str, dict[str, bytes]]
) -> None:
    task_id, made = task_with_artifacts
    listed = client.get(f"/v1/tasks/{task_id}/artifacts", headers=AUTH).json()["artifacts"]
    assert [a["name"] for a in listed] == list(made)  # once each, and only what is kept
    png = client.get(listed[0]["url"], headers=AUTH)
    assert png.content == b"\x89PNG" and png.headers["content-type"] == "image/png"
    assert png.headers["content-length"] == "4"
    assert png.headers["content-disposition"] == f'inline; filename="{listed[0]["name"]}"'
    html = client.get(listed[1]["url"], headers=AUTH)
    assert html.headers["content-disposition"].startswith("attachment")
    assert html.headers["content-security-policy"] == "sandbox"
    assert html.headers["x-content-type-options"] == "nosniff"


def test_another_tenant_and_unknown_names_get_404(
    client: TestClient, task_with_artifacts: tuple[str, dict[str, bytes]]
) -> None:
    task_id, made = task_with_artifacts
    name = next(iter(made))
    assert client.get(f"/v1/tasks/{task_id}/artifacts", headers=OTHER).status_code == 404
    assert client.get(f"/v1/tasks/{task_id}/artifacts/{name}", headers=OTHER).status_code == 404
    for bad in ("figure-000000000000.png", "..%2F..%2Fetc%2Fpasswd", "x.png"):
        assert client.get(f"/v1/tasks/{task_id}/artifacts/{bad}", headers=AUTH).status_code == 404
    gone = artifact_name("image", "image/png", b"expired")  # described, but no longer kept
    assert client.get(f"/v1/tasks/{task_id}/artifacts/{gone}", headers=AUTH).status_code == 404


def test_an_artifact_store_that_does_not_answer_is_a_503(
    client: TestClient, task_with_artifacts: tuple[str, dict[str, bytes]]
) -> None:
    task_id, made = task_with_artifacts
    closed = RedisArtifactStore.from_url(
        f"redis://127.0.0.1:{free_port()}/0", ArtifactLimits(1000, 1000)
    )
    state = client.app.state  # type: ignore[attr-defined]
    state.artifacts, kept = closed, state.artifacts  # the lifespan closes the one it finds
    for url in (
        f"/v1/tasks/{task_id}/artifacts",
        f"/v1/tasks/{task_id}/artifacts/{next(iter(made))}",
    ):
        answer = client.get(url, headers=AUTH)
        assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
        assert answer.json() == {"detail": "the artifact store does not answer; retry shortly"}
    state.artifacts = kept


@pytest.mark.parametrize(
    ("op", "outcome", "status"),
    [
        ("read", "no_session", 404),
        ("list", "no_session", 404),
        ("read", "not_found", 404),
        ("read", "not_a_file", 404),
        ("read", "too_large", 422),
        ("read", "invalid", 422),
        ("write", "not_a_file", 422),
        ("write", "invalid", 422),
        ("write", "quota", 413),
        ("write", "no_space", 413),
        ("write", "unavailable", 503),
        ("list", "unavailable", 503),
    ],
)
def test_a_tool_workers_refusal_becomes_the_apis_answer(op: str, outcome: str, status: int) -> None:
    job = SessionFilesJob(tenant="t", session_id="s", op=op, path="a", expires_at=0)
    refused = _refused(job, FilesReply(outcome=outcome, detail="why"))
    assert refused.status_code == status
    assert refused.detail == "why" or refused.detail[0]["msg"] == "why"
