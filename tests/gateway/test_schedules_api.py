"""/v1/schedules against a real Redis: create, list, read, delete, each a tenant's own; a bad
cron, an unknown agent or tool, a tenant past its cap refused with the reason; a schedule's
runs listed with their tasks' status once the tick has run it."""

from __future__ import annotations

import asyncio
import time

from fastapi.testclient import TestClient

from services.gateway.app import create_app
from taskyard.plumbing.celery_app import make_celery
from taskyard.plumbing.settings import GatewaySettings
from taskyard.runtime.schedules.runner import ScheduleRunner
from taskyard.runtime.store import TaskStore

A = {"Authorization": "Bearer key-a"}
B = {"Authorization": "Bearer key-b"}
DAILY = {"cron": "0 9 * * *", "name": "standup notes", "task": {"input": "summarise"}}


def _create(client: TestClient, body: dict, headers: dict = A) -> dict:
    resp = client.post("/v1/schedules", json=body, headers=headers)
    assert resp.status_code == 201, resp.text
    return resp.json()


def test_a_schedule_is_created_listed_read_and_deleted(client: TestClient) -> None:
    made = _create(client, DAILY)
    assert made["id"].startswith("sch_") and made["missed"] == "run_once"
    assert made["next_run_at"] > time.time() and made["next_run_at"] % 86400 == 9 * 3600
    assert made["task"]["input"] == "summarise" and made["runs"] == 0
    other = _create(client, {**DAILY, "cron": "@hourly", "missed": "skip"})
    listed = client.get("/v1/schedules", headers=A).json()["schedules"]
    assert [s["id"] for s in listed] == [other["id"], made["id"]]
    assert client.get(f"/v1/schedules/{made['id']}", headers=A).json() == made
    assert client.get(f"/v1/schedules/{made['id']}/runs", headers=A).json() == {"runs": []}
    assert client.delete(f"/v1/schedules/{made['id']}", headers=A).status_code == 204
    assert client.get(f"/v1/schedules/{made['id']}", headers=A).status_code == 404
    assert client.delete(f"/v1/schedules/{made['id']}", headers=A).status_code == 404


def test_another_tenants_schedule_is_a_404(client: TestClient) -> None:
    made = _create(client, DAILY)
    for resp in (
        client.get(f"/v1/schedules/{made['id']}", headers=B),
        client.get(f"/v1/schedules/{made['id']}/runs", headers=B),
        client.delete(f"/v1/schedules/{made['id']}", headers=B),
        client.get("/v1/schedules/not-an-id", headers=A),
    ):
        assert resp.status_code == 404 and resp.json()["detail"] == "no such schedule"
    assert client.get("/v1/schedules", headers=B).json() == {"schedules": []}
    assert client.get(f"/v1/schedules/{made['id']}", headers=A).status_code == 200


def test_bad_requests_are_422_saying_where_and_why(client: TestClient) -> None:
    cases = [
        ({**DAILY, "cron": "0 25 * * *"}, ["body", "cron"], "is not a cron expression"),
        ({**DAILY, "cron": "* * * * * *"}, ["body", "cron"], "the least interval allowed"),
        ({**DAILY, "cron": "0 0 30 2 *"}, ["body", "cron"], "never fires"),
        ({**DAILY, "task": {"input": "x", "agent": {"agent": "nobody"}}},
         ["body", "task", "agent", "agent"], "nobody"),
        ({**DAILY, "task": {"input": "x", "agent": {"tools": ["NoSuchTool"]}}},
         ["body", "task", "agent", "tools"], "NoSuchTool"),
        ({**DAILY, "missed": "catch_up"}, ["body", "missed"], "run_once"),
        ({**DAILY, "task": {"input": ""}}, ["body", "task", "input"], "at least 1"),
        ({**DAILY, "task": {"input": "x", "agent": {"deadline_s": 3601}}},
         ["body", "task", "agent", "deadline_s"],
         "deadline_s 3601 is above this tenant's maximum of 3600 s"),
    ]  # fmt: skip
    for body, loc, says in cases:
        resp = client.post("/v1/schedules", json=body, headers=A)
        assert resp.status_code == 422, body
        problem = resp.json()["detail"][0]
        assert problem["loc"] == loc and says in problem["msg"], problem
    assert client.get("/v1/schedules", headers=A).json() == {"schedules": []}


def test_a_tenant_past_its_cap_is_a_409(settings: GatewaySettings) -> None:
    capped = settings.model_copy(update={"schedules_max_per_tenant": 1})
    with TestClient(create_app(capped)) as client:
        _create(client, DAILY)
        resp = client.post("/v1/schedules", json=DAILY, headers=A)
        assert resp.status_code == 409
        assert (
            resp.json()["detail"]
            == "this tenant has 1 schedules, the most allowed: delete one first"
        )
        _create(client, DAILY, headers=B)  # the cap is per tenant


def test_a_schedules_runs_are_listed_with_their_tasks_status(
    client: TestClient, settings: GatewaySettings
) -> None:
    made = _create(client, DAILY)

    async def tick() -> None:
        store = TaskStore.from_url(settings.redis_url, settings.broker_url)
        later = made["next_run_at"] + 1
        await ScheduleRunner(store, make_celery(settings), settings, lambda: later).tick()
        await store.close()

    asyncio.run(tick())
    (run,) = client.get(f"/v1/schedules/{made['id']}/runs", headers=A).json()["runs"]
    assert run["outcome"] == "submitted" and run["status"] == "queued" and not run["late"]
    assert run["fire_at"] == made["next_run_at"]
    task = client.get(f"/v1/tasks/{run['task_id']}", headers=A).json()
    assert task["messages"][0]["content"] == "summarise"
    schedule = client.get(f"/v1/schedules/{made['id']}", headers=A).json()
    assert schedule["runs"] == 1 and schedule["next_run_at"] == made["next_run_at"] + 86400
