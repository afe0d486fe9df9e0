"""Webhook subscriptions at the gateway: the URL is checked at the door (scheme, address
policy), the task shows its webhook and deliveries, each tenant reads its own signing secret."""

from __future__ import annotations

import base64
import json

import pytest
import redis
from fastapi.testclient import TestClient

from services.gateway.app import create_app
from taskyard.plumbing import keys
from taskyard.plumbing.settings import GatewaySettings

AUTH = {"Authorization": "Bearer key-a"}
HOOK = "https://hooks.example.com/taskyard"


def _delivery_jobs(settings: GatewaySettings) -> list[str]:
    broker = redis.Redis.from_url(settings.broker_url)
    bodies = [json.loads(m)["body"] for m in broker.lrange(keys.WEBHOOK_QUEUE, 0, -1)]
    return [json.loads(base64.b64decode(b))[0][0]["task_id"] for b in bodies]


@pytest.mark.parametrize(
    ("webhook", "where"),
    [
        ({"url": "ftp://hooks.example.com/x"}, "url"),
        ({"url": "https://"}, "url"),
        ({"url": HOOK, "events": []}, "events"),
        ({"url": HOOK, "events": ["finished"]}, "events"),
        ({"url": HOOK, "secret": "mine"}, "secret"),
        ({"url": "http://127.0.0.1:9/hook"}, "url"),  # loopback: refused by default
        ({"url": "http://10.1.2.3/hook"}, "url"),
        ({"url": "http://[::1]/hook"}, "url"),
        ({"url": "http://169.254.169.254/latest"}, "url"),  # cloud metadata
        ({"url": "http://localhost:9/hook"}, "url"),  # a name resolving to loopback
    ],
)
def test_a_bad_webhook_is_422_naming_the_field(
    client: TestClient, webhook: dict, where: str
) -> None:
    resp = client.post("/v1/tasks", json={"input": "hi", "webhook": webhook}, headers=AUTH)
    assert resp.status_code == 422, resp.text
    assert any(where in map(str, d["loc"]) for d in resp.json()["detail"]), resp.json()


def test_a_private_receiver_is_accepted_when_the_deployment_allows_it(
    settings: GatewaySettings,
) -> None:
    allowed = settings.model_copy(update={"webhook_allow_private": True})
    with TestClient(create_app(allowed)) as client:
        body = {"input": "hi", "webhook": {"url": "http://127.0.0.1:9/hook"}}
        assert client.post("/v1/tasks", json=body, headers=AUTH).status_code == 202


def test_the_task_shows_its_webhook_and_its_deliveries(
    client: TestClient, settings: GatewaySettings
) -> None:
    body = {"input": "hi", "webhook": {"url": HOOK, "events": ["queued", "succeeded"]}}
    task_id = client.post("/v1/tasks", json=body, headers=AUTH).json()["id"]
    task = client.get(f"/v1/tasks/{task_id}", headers=AUTH).json()
    assert task["webhook"] == {"url": HOOK, "events": ["queued", "succeeded"], "format": "standard",
                               "id": None, "sends": []}  # fmt: skip
    assert task["webhook_deliveries"] == []  # none made yet: no worker runs here
    assert _delivery_jobs(settings) == [task_id]  # `queued` was subscribed: its job is out
    plain = client.post("/v1/tasks", json={"input": "hi"}, headers=AUTH).json()["id"]
    assert client.get(f"/v1/tasks/{plain}", headers=AUTH).json()["webhook"] is None


def test_each_tenant_reads_its_own_stable_signing_secret(client: TestClient) -> None:
    first = client.get("/v1/webhooks/secret", headers=AUTH).json()["secret"]
    assert first.startswith("whsec_")
    assert client.get("/v1/webhooks/secret", headers=AUTH).json()["secret"] == first
    other = client.get("/v1/webhooks/secret", headers={"Authorization": "Bearer key-b"})
    assert other.json()["secret"] != first
    assert client.get("/v1/webhooks/secret").status_code == 401
