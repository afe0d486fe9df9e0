"""GET /v1/tasks: the caller's tasks, newest first, by page, filtered by status or session."""

from __future__ import annotations

from fastapi.testclient import TestClient

AUTH_A = {"Authorization": "Bearer key-a"}
AUTH_B = {"Authorization": "Bearer key-b"}


def _submit(client: TestClient, text: str, session: str, auth: dict = AUTH_A) -> str:
    body = {"input": text, "session_id": session}
    return client.post("/v1/tasks", json=body, headers=auth).json()["id"]


def test_newest_first_in_pages_and_only_the_callers(client: TestClient) -> None:
    ids = [_submit(client, f"task {i}", f"s{i}") for i in range(5)]
    _submit(client, "another tenant's", "s0", AUTH_B)
    first = client.get("/v1/tasks", params={"limit": 2}, headers=AUTH_A).json()
    assert [t["id"] for t in first["tasks"]] == ids[:-3:-1]
    assert first["tasks"][0]["input"] == "task 4" and first["tasks"][0]["status"] == "queued"
    rest = client.get(
        "/v1/tasks", params={"limit": 10, "cursor": first["next_cursor"]}, headers=AUTH_A
    ).json()
    assert [t["id"] for t in rest["tasks"]] == ids[2::-1]
    assert rest["next_cursor"] is None


def test_filters_by_status_and_session(client: TestClient) -> None:
    running = _submit(client, "first", "shared")
    waiting = _submit(client, "second", "shared")  # queued behind the first
    client.post(f"/v1/tasks/{running}/cancel", headers=AUTH_A)
    _submit(client, "elsewhere", "other")
    by_session = client.get("/v1/tasks", params={"session_id": "shared"}, headers=AUTH_A).json()
    assert [t["id"] for t in by_session["tasks"]] == [waiting, running]
    cancelled = client.get("/v1/tasks", params={"status": "cancelled"}, headers=AUTH_A).json()
    assert [t["id"] for t in cancelled["tasks"]] == [running]


def test_bad_parameters_are_422(client: TestClient) -> None:
    for params in ({"limit": 0}, {"cursor": "yesterday"}, {"status": "sleeping"}):
        assert client.get("/v1/tasks", params=params, headers=AUTH_A).status_code == 422
    assert client.get("/v1/tasks").status_code == 401


def test_method_not_allowed_names_every_method_of_the_path(client: TestClient) -> None:
    resp = client.put("/v1/tasks", headers=AUTH_A)
    assert resp.status_code == 405
    assert resp.headers["allow"] == "GET, POST"
