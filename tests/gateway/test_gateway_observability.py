"""The gateway's /metrics, its system view (/v1/system) and the dashboard's static files."""

from __future__ import annotations

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

AUTH = {"Authorization": "Bearer key-a"}


def _samples(client: TestClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = client.get("/metrics").text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_count_requests_per_route_tasks_and_queue_depths(client: TestClient) -> None:
    before = _samples(client)
    route = (("method", "GET"), ("route", "/v1/tasks/{task_id}"), ("status", "404"))
    key = ("taskyard_gateway_requests_total", route)
    task = client.post("/v1/tasks", json={"input": "hi", "session_id": "m1"}, headers=AUTH)
    client.post("/v1/tasks", json={"input": "again", "session_id": "m1"}, headers=AUTH)
    client.get(f"/v1/tasks/{'task_' + '0' * 32}", headers=AUTH)
    after = _samples(client)
    assert task.status_code == 202
    assert after[key] == before.get(key, 0) + 1
    for status in ("queued", "waiting"):
        counted = ("taskyard_tasks_accepted_total", (("status", status),))
        assert after[counted] == before.get(counted, 0) + 1
    assert after["taskyard_queue_depth", (("queue", "agent"),)] == 1  # the first task's step
    assert after["taskyard_queue_depth", (("queue", "tools.IPythonInterpreter"),)] == 0
    latency = (
        "taskyard_gateway_request_seconds_count",
        (("method", "POST"), ("route", "/v1/tasks")),
    )
    assert after[latency] >= 2


def test_system_view_without_workers_or_proxy(client: TestClient) -> None:
    client.post("/v1/tasks", json={"input": "hi"}, headers=AUTH)
    view = client.get("/v1/system", headers=AUTH).json()
    assert {"name": "agent", "depth": 1} in view["queues"]
    assert view["workers"] == []  # nothing answers a ping on this broker
    assert view["replicas"] == []  # no proxy at the configured address
    assert client.get("/v1/system").status_code == 401


def test_the_dashboard_is_served_without_a_key(client: TestClient) -> None:
    page = client.get("/ui/")
    assert page.status_code == 200 and "taskyard" in page.text
