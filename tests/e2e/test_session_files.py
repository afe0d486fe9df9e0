"""End to end: a session's files through the real stack (gateway, Redis, tool worker, Docker
sandbox): uploaded, listed and downloaded as sent; what the session's code writes shows too;
a task names the files it works on and the model is told; nothing leaves the working
directory; size limits answer 413 with the reason; sessions are per tenant; files go with
their sandbox."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from e2e_support import tool_output, wait_status

from devstack.stack import LocalStack
from taskyard.client import TaskyardClient

pytestmark = pytest.mark.e2e

FILE_LIMIT, SESSION_LIMIT = 1_000_000, 1_500_000


@pytest.fixture(scope="module")
def stack(sandbox_image: str) -> Iterator[LocalStack]:
    env = {
        "TASKYARD_FILES_MAX_BYTES": str(FILE_LIMIT),
        "TASKYARD_FILES_SESSION_MAX_BYTES": str(SESSION_LIMIT),
    }
    stack = LocalStack(api_keys="key-a=tenant-a,key-b=tenant-b", extra_env=env).start()
    yield stack
    stack.stop()


@pytest.fixture
def other(stack: LocalStack) -> Iterator[TaskyardClient]:
    client = TaskyardClient(stack.gateway_url, "key-b")
    yield client
    client.close()


def _run(client: TaskyardClient, session: str, code: str, **kw: object) -> dict:
    task = client.submit(f"```python\n{code}\n```", session_id=session, **kw)  # type: ignore[arg-type]
    return wait_status(client, task["id"])


def test_an_upload_is_listed_and_downloaded_as_sent(client: TaskyardClient) -> None:
    data = bytes(range(256)) * 100
    uploaded = client.upload("f-roundtrip", data, "data/bytes.bin")
    assert (uploaded["path"], uploaded["size"]) == ("data/bytes.bin", len(data))
    assert [f["path"] for f in client.files("f-roundtrip")] == ["data/bytes.bin"]
    assert client.download("f-roundtrip", "data/bytes.bin") == data
    answer = client.http.get("/v1/sessions/f-roundtrip/files/data/bytes.bin")
    assert answer.headers["content-disposition"] == (
        "attachment; filename=\"bytes.bin\"; filename*=UTF-8''bytes.bin"
    )


def test_files_the_code_writes_are_listed_too(client: TaskyardClient) -> None:
    task = _run(client, "f-written", "open('made.txt', 'w').write('made by the code')")
    assert task["status"] == "succeeded", task
    assert [f["path"] for f in client.files("f-written")] == ["made.txt"]
    assert client.download("f-written", "made.txt") == b"made by the code"


def test_a_task_is_told_about_the_files_it_names(client: TaskyardClient) -> None:
    client.upload("f-named", b"3\n4\n5\n", "numbers.csv")
    code = "print(sum(int(line) for line in open('numbers.csv')))"
    task = _run(client, "f-named", code, files=["numbers.csv"])
    assert task["status"] == "succeeded", task
    asked = task["messages"][0]["content"]
    assert asked.endswith("Files uploaded for this task, in the working directory: "
                          "numbers.csv (6 B).")  # fmt: skip
    assert tool_output(task).strip() == "12"
    body = {"input": "x", "session_id": "f-named", "files": ["numbers.csv", "nope.csv"]}
    missing = client.http.post("/v1/tasks", json=body)
    assert missing.status_code == 422
    (issue,) = missing.json()["detail"]
    assert issue["loc"] == ["body", "files", 1] and "nope.csv" in issue["msg"]


def test_nothing_leaves_the_working_directory(client: TaskyardClient) -> None:
    client.upload("f-escape", b"mine", "mine.txt")
    links = "import os\nos.symlink('/etc/passwd', 'passwd')\nos.symlink('..', 'up')\n" \
            "os.symlink('/etc', 'etc')"  # fmt: skip
    assert _run(client, "f-escape", links)["status"] == "succeeded"
    for path in ("passwd", "etc/passwd", "up/work/mine.txt"):
        answer = client.http.get(f"/v1/sessions/f-escape/files/{path}")
        assert answer.status_code == 404, path
        assert "symbolic link" in answer.json()["detail"]
    for raw in ("%2E%2E/etc/passwd", "/etc/passwd"):
        assert client.http.get(f"/v1/sessions/f-escape/files/{raw}").status_code == 422
    for path in ("up/escaped.txt", "etc/escaped", "../escaped"):
        answer = client.http.post("/v1/sessions/f-escape/files", files={"file": ("x", b"x")},
                                  data={"path": path})  # fmt: skip
        assert answer.status_code == 422, path
    assert [f["path"] for f in client.files("f-escape")] == ["mine.txt"]


def test_size_limits_answer_413_with_the_reason(client: TaskyardClient) -> None:
    over = client.http.post("/v1/sessions/f-size/files",
                            files={"file": ("big", b"x" * (FILE_LIMIT + 1))})  # fmt: skip
    assert over.status_code == 413 and "TASKYARD_FILES_MAX_BYTES" in over.json()["detail"]
    client.upload("f-size", b"a" * 900_000, "a.bin")
    too_much = client.http.post("/v1/sessions/f-size/files",
                                files={"file": ("b.bin", b"b" * 900_000)})  # fmt: skip
    assert too_much.status_code == 413
    assert "TASKYARD_FILES_SESSION_MAX_BYTES" in too_much.json()["detail"]
    client.upload("f-size", b"c" * 900_000, "a.bin")  # replacing a file counts it once
    assert [(f["path"], f["size"]) for f in client.files("f-size")] == [("a.bin", 900_000)]


def test_sessions_are_per_tenant(client: TaskyardClient, other: TaskyardClient) -> None:
    client.upload("f-tenant", b"tenant a's", "secret.txt")
    assert other.http.get("/v1/sessions/f-tenant/files").status_code == 404
    assert other.http.get("/v1/sessions/f-tenant/files/secret.txt").status_code == 404
    other.upload("f-tenant", b"tenant b's", "own.txt")  # the same id: b's own session
    assert [f["path"] for f in client.files("f-tenant")] == ["secret.txt"]
    assert [f["path"] for f in other.files("f-tenant")] == ["own.txt"]


def test_files_go_with_their_sandbox(client: TaskyardClient, stack: LocalStack) -> None:
    """Last: it restarts the tool worker, which removes every sandbox the old one left."""
    client.upload("f-gone", b"1", "kept-for-now.txt")
    stack.kill("tool_worker")
    stack.restart("tool_worker")
    gone = client.http.get("/v1/sessions/f-gone/files")
    assert gone.status_code == 404 and "reaped" in gone.json()["detail"]
