"""The gateway's HTTP API against a real Redis (store and Celery broker)."""

from __future__ import annotations

import asyncio
import json

import pytest
from fastapi.testclient import TestClient
from gateway_support import queued_steps as _queued_steps

from services.gateway.app import create_app
from taskyard.agentkit.schema import AgentMessage
from taskyard.plumbing.settings import GatewaySettings
from taskyard.runtime.events import EventKind
from taskyard.runtime.store import TaskStore
from taskyard.runtime.task import TaskStatus

AUTH = {"Authorization": "Bearer key-a"}


def _finish(settings: GatewaySettings, task_id: str, reply: AgentMessage) -> None:
    """Publish a reply and end the task, as a worker would."""

    async def finish() -> None:
        store = TaskStore.from_url(settings.redis_url, settings.broker_url)
        await store.publish(task_id, EventKind.MESSAGE, reply.model_dump(mode="json"))
        record = await store.get(task_id)
        assert record is not None
        await store.end(record, TaskStatus.FAILED, error="stopped by the test")
        await store.close()

    asyncio.run(finish())


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer nope"}, {"Authorization": "x"}])
def test_missing_or_wrong_key_is_401(client: TestClient, headers: dict) -> None:
    resp = client.post("/v1/tasks", json={"input": "hi"}, headers=headers)
    assert resp.status_code == 401
    assert "API key" in resp.json()["detail"]


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"input": ""},
        {"input": 3},
        {"input": "hi", "agent": {"max_steps": 0}},
        {"input": "hi", "agent": {"deadline_s": 0}},
        {"input": "hi", "agent": {"deadline_s": -30}},
        {"input": "hi", "session_id": "bad id!"},
        {"input": "hi", "surprise": 1},
    ],
)
def test_malformed_body_is_422_with_reason(client: TestClient, body: dict) -> None:
    resp = client.post("/v1/tasks", json=body, headers=AUTH)
    assert resp.status_code == 422
    assert resp.json()["detail"][0]["loc"]


@pytest.mark.parametrize(
    ("agent", "field"),
    [
        ({"tools": ["NoSuchTool"]}, "tools"),
        ({"tools": ["WebBrowser.nope"]}, "tools"),
        ({"agent": "no_such_agent"}, "agent"),
    ],
)
def test_unknown_tool_or_agent_is_422(
    client: TestClient, settings: GatewaySettings, agent: dict, field: str
) -> None:
    resp = client.post("/v1/tasks", json={"input": "hi", "agent": agent}, headers=AUTH)
    assert resp.status_code == 422
    assert resp.json()["detail"][0]["loc"] == ["body", "agent", field]
    assert (
        "unknown" in resp.json()["detail"][0]["msg"] or "no API" in resp.json()["detail"][0]["msg"]
    )
    assert _queued_steps(settings) == []


def test_submit_stores_and_enqueues(client: TestClient, settings: GatewaySettings) -> None:
    resp = client.post("/v1/tasks", json={"input": "hi", "session_id": "s1"}, headers=AUTH)
    assert resp.status_code == 202
    body = resp.json()
    assert body["status"] == "queued" and body["session_id"] == "s1"
    assert _queued_steps(settings) == [(body["id"], 0)]
    task = client.get(f"/v1/tasks/{body['id']}", headers=AUTH).json()
    assert task["status"] == "queued"
    assert [(m["sender"], m["content"]) for m in task["messages"]] == [("user", "hi")]


def test_idempotency_key_returns_the_same_task(
    client: TestClient, settings: GatewaySettings
) -> None:
    headers = {**AUTH, "Idempotency-Key": "abc"}
    first = client.post("/v1/tasks", json={"input": "hi"}, headers=headers).json()
    second = client.post("/v1/tasks", json={"input": "hi"}, headers=headers).json()
    assert first["id"] == second["id"]
    assert len(_queued_steps(settings)) == 1
    changed = client.post("/v1/tasks", json={"input": "other"}, headers=headers)
    assert changed.status_code == 422
    (problem,) = changed.json()["detail"]
    assert problem["loc"] == ["header", "idempotency-key"]
    assert "different request body" in problem["msg"]


def test_busy_session_waits_or_rejects(client: TestClient, settings: GatewaySettings) -> None:
    first = client.post("/v1/tasks", json={"input": "a", "session_id": "s"}, headers=AUTH)
    waiting = client.post("/v1/tasks", json={"input": "b", "session_id": "s"}, headers=AUTH)
    rejected = client.post(
        "/v1/tasks",
        json={"input": "c", "session_id": "s", "if_session_busy": "reject"},
        headers=AUTH,
    )
    assert first.status_code == waiting.status_code == 202
    assert rejected.status_code == 409
    assert (
        rejected.json()["detail"]
        == f"session s is running task {first.json()['id']} (if_session_busy=reject)"
    )
    assert _queued_steps(settings) == [(first.json()["id"], 0)]  # b waits its turn


def _submit(client: TestClient, **body: object) -> dict:
    resp = client.post("/v1/tasks", json={"input": "x", "session_id": "busy", **body}, headers=AUTH)
    assert resp.status_code == 202, resp.text
    return resp.json()


@pytest.mark.parametrize(
    ("asked", "said"), [("interrupt", "interrupted"), ("rollback", "rolled_back")]
)
def test_a_task_may_take_its_busy_session_now(
    client: TestClient, settings: GatewaySettings, asked: str, said: str
) -> None:
    running = _submit(client)
    waiting = _submit(client, if_session_busy="wait")  # the old name of enqueue
    now = _submit(client, if_session_busy=asked)
    assert now["status"] == "queued"
    assert _queued_steps(settings) == [(running["id"], 0), (now["id"], 0)]  # no wait
    ended = client.get(f"/v1/tasks/{running['id']}", headers=AUTH).json()
    verb = "interrupted by" if asked == "interrupt" else "rolled back for"
    assert (ended["status"], ended["error"]) == ("cancelled", f"{verb} task {now['id']}")
    assert client.get(f"/v1/tasks/{waiting['id']}", headers=AUTH).json()["status"] == "queued"
    session = client.get("/v1/sessions/busy", headers=AUTH).json()
    assert (session["running"], session["waiting"]) == (now["id"], [waiting["id"]])
    with client.stream("GET", f"/v1/tasks/{running['id']}/events", headers=AUTH) as events:
        last = [line for line in events.iter_lines() if line.startswith("data:")][-1]
    assert json.loads(last.removeprefix("data:")) == {
        "status": "cancelled",
        "error": ended["error"],
    }
    assert _first_status(settings, now["id"]) == {
        "status": "queued", said: running["id"],
    }  # fmt: skip


def test_the_agents_default_applies_unless_the_task_says_otherwise(
    client: TestClient, settings: GatewaySettings
) -> None:
    rejecting = {"if_session_busy": "reject"}
    _submit(client, agent=rejecting)
    refused = client.post(
        "/v1/tasks", json={"input": "y", "session_id": "busy", "agent": rejecting}, headers=AUTH
    )
    assert refused.status_code == 409
    _submit(client, agent=rejecting, if_session_busy="enqueue")  # the task's own wins
    bad = client.post("/v1/tasks", json={"input": "z", "if_session_busy": "later"}, headers=AUTH)
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["loc"][:2] == ["body", "if_session_busy"]


def test_a_deadline_over_the_tenants_maximum_is_422_saying_the_maximum(
    settings: GatewaySettings,
) -> None:
    own = settings.model_copy(update={"task_max_deadlines": "tenant-b=60"})
    with TestClient(create_app(own)) as client:
        for key, asked, most in (("key-a", 5000, "3600"), ("key-b", 60.5, "60")):
            body = {"input": "hi", "agent": {"deadline_s": asked}}
            resp = client.post("/v1/tasks", json=body, headers={"Authorization": f"Bearer {key}"})
            assert resp.status_code == 422
            (problem,) = resp.json()["detail"]
            assert problem["loc"] == ["body", "agent", "deadline_s"]
            said = f"deadline_s {asked} is above this tenant's maximum of {most} s"
            assert problem["msg"] == said
        assert _queued_steps(settings) == []
        at_most = {"input": "hi", "agent": {"deadline_s": 3600}}
        assert client.post("/v1/tasks", json=at_most, headers=AUTH).status_code == 202


def test_the_record_shows_the_tasks_deadline(settings: GatewaySettings) -> None:
    own = settings.model_copy(update={"task_max_deadlines": "tenant-b=60"})
    cases = [
        ("key-a", {"deadline_s": 30}, 30),
        ("key-a", {}, 600),  # TASK_DEADLINE_S
        ("key-b", {}, 60),  # the default, cut to the tenant's maximum
    ]
    with TestClient(create_app(own)) as client:
        for key, agent, deadline_s in cases:
            headers = {"Authorization": f"Bearer {key}"}
            body = {"input": "hi", "agent": agent}
            task_id = client.post("/v1/tasks", json=body, headers=headers).json()["id"]
            task = client.get(f"/v1/tasks/{task_id}", headers=headers).json()
            assert task["deadline_s"] == deadline_s
            assert task["deadline_at"] == task["created_at"] + deadline_s


def _first_status(settings: GatewaySettings, task_id: str) -> dict:
    async def read() -> dict:
        store = TaskStore.from_url(settings.redis_url, settings.broker_url)
        try:
            return (await store.events(task_id))[0].data
        finally:
            await store.close()

    return asyncio.run(read())


def test_other_tenants_task_is_404(client: TestClient) -> None:
    task_id = client.post("/v1/tasks", json={"input": "hi"}, headers=AUTH).json()["id"]
    resp = client.get(f"/v1/tasks/{task_id}", headers={"Authorization": "Bearer key-b"})
    assert resp.status_code == 404


ROUTES = [("GET", "/v1/tasks/{}"), ("GET", "/v1/tasks/{}/events"), ("POST", "/v1/tasks/{}/cancel")]


@pytest.mark.parametrize(("method", "route"), ROUTES)
def test_crafted_ids_are_404_like_any_task_not_yours(
    client: TestClient, method: str, route: str
) -> None:
    """Ids that are not a task id's shape never reach Redis: the same 404 as another tenant's
    task, so nothing tells what exists."""
    mine = client.post("/v1/tasks", json={"input": "hi"}, headers=AUTH).json()["id"]
    theirs = client.post(
        "/v1/tasks", json={"input": "hi"}, headers={"Authorization": "Bearer key-b"}
    ).json()["id"]
    crafted = [f"{mine}:events", f"{mine}:step:0:results", mine.upper(), mine[:-1], "x" * 300,
               f"{mine}%00", f"{mine}%0A", "%2E%2E", theirs, "task_" + "0" * 32]  # fmt: skip
    replies = [client.request(method, route.format(c), headers=AUTH) for c in crafted]
    answers = {(r.status_code, r.text) for r in replies}
    assert answers == {(404, '{"detail":"no such task"}')}


def test_events_stream_ends_after_final_and_resumes(
    client: TestClient, settings: GatewaySettings
) -> None:
    task_id = client.post("/v1/tasks", json={"input": "hi"}, headers=AUTH).json()["id"]
    _finish(settings, task_id, AgentMessage(sender="assistant", content="done"))
    text = client.get(f"/v1/tasks/{task_id}/events", headers=AUTH).text
    ids = [line[4:] for line in text.splitlines() if line.startswith("id: ")]
    kinds = [line[7:] for line in text.splitlines() if line.startswith("event: ")]
    assert kinds == ["status", "message", "message", "status"]  # queued, asked, answered, ended
    resumed = client.get(
        f"/v1/tasks/{task_id}/events", headers={**AUTH, "Last-Event-ID": ids[1]}
    ).text
    assert [line[4:] for line in resumed.splitlines() if line.startswith("id: ")] == ids[2:]
    after_final = client.get(
        f"/v1/tasks/{task_id}/events", headers={**AUTH, "Last-Event-ID": ids[-1]}
    )
    assert after_final.status_code == 200 and after_final.text == ""  # ends at once


@pytest.mark.parametrize(
    "last_id", ["garbage", "-1", "1-2-3", "x" * 300, "77189575627459484419-170"]
)
def test_an_invalid_last_event_id_is_400(client: TestClient, last_id: str) -> None:
    task_id = client.post("/v1/tasks", json={"input": "hi"}, headers=AUTH).json()["id"]
    resp = client.get(f"/v1/tasks/{task_id}/events", headers={**AUTH, "Last-Event-ID": last_id})
    assert resp.status_code == 400
    assert "Last-Event-ID" in resp.json()["detail"]


def test_openapi_docs_served(client: TestClient) -> None:
    assert client.get("/docs").status_code == 200
    assert "/v1/tasks" in client.get("/openapi.json").json()["paths"]


def test_cancel_ends_the_task_and_hands_the_session_on(
    client: TestClient, settings: GatewaySettings
) -> None:
    first = client.post("/v1/tasks", json={"input": "a", "session_id": "c"}, headers=AUTH).json()
    second = client.post("/v1/tasks", json={"input": "b", "session_id": "c"}, headers=AUTH).json()
    resp = client.post(f"/v1/tasks/{first['id']}/cancel", headers=AUTH)
    assert resp.status_code == 200 and resp.json()["status"] == "cancelled"
    assert _queued_steps(settings) == [(first["id"], 0), (second["id"], 0)]
    text = client.get(f"/v1/tasks/{first['id']}/events", headers=AUTH).text
    last = json.loads(text.rstrip().splitlines()[-1].removeprefix("data: "))
    assert last == {"status": "cancelled", "error": "cancelled by the client"}  # it ended
    again = client.post(f"/v1/tasks/{first['id']}/cancel", headers=AUTH)
    assert again.status_code == 409 and "already cancelled" in again.json()["detail"]
    other = client.post(
        f"/v1/tasks/{second['id']}/cancel", headers={"Authorization": "Bearer key-b"}
    )
    assert other.status_code == 404


def test_a_task_no_replica_confirms_is_503_and_its_key_finds_it_later(
    settings: GatewaySettings,
) -> None:
    """The gateway promises that a failover loses no 202: with no replica to confirm the task,
    it answers 503 (the task may run); the same Idempotency-Key then finds that one task."""
    body, key = {"input": "hi"}, {**AUTH, "Idempotency-Key": "once"}
    waiting = settings.model_copy(update={"gateway_accept_replicas": 1,
                                          "gateway_accept_wait_ms": 50})  # fmt: skip
    with TestClient(create_app(waiting)) as strict:
        refused = strict.post("/v1/tasks", json=body, headers=key)
    assert refused.status_code == 503, refused.text
    assert refused.headers["retry-after"] == "1"
    assert "no replica confirmed the task within 50 ms" in refused.json()["detail"]
    with TestClient(create_app(settings)) as lenient:
        found = lenient.post("/v1/tasks", json=body, headers=key)
        assert found.status_code == 202
        listed = lenient.get("/v1/tasks", headers=AUTH).json()["tasks"]
    assert [task["id"] for task in listed] == [found.json()["id"]]
