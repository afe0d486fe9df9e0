"""While Redis does not answer, every route that needs it answers 503 with Retry-After in the
one error shape (nothing was done, so the request may be sent again)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from devstack.procs import free_port
from services.gateway.app import create_app
from taskyard.plumbing.settings import GatewaySettings

AUTH = {"Authorization": "Bearer key-a"}
TASK = "task_" + "0" * 32


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    nowhere = f"redis://127.0.0.1:{free_port()}"  # nothing listens there
    settings = GatewaySettings(redis_url=f"{nowhere}/0", broker_url=f"{nowhere}/1",
                        result_backend=f"{nowhere}/2", api_keys="key-a=tenant-a")  # fmt: skip
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        yield client


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/tasks", {"input": "hi"}),
        ("GET", "/v1/tasks", None),
        ("GET", f"/v1/tasks/{TASK}", None),
        ("POST", f"/v1/tasks/{TASK}/cancel", None),
        ("GET", "/v1/sessions", None),
        ("GET", "/v1/sessions/s1", None),
        ("GET", "/v1/webhooks/secret", None),
    ],
)
def test_a_route_needing_redis_answers_503_with_retry_after(
    client: TestClient, method: str, path: str, body: dict | None
) -> None:
    resp = client.request(method, path, json=body, headers=AUTH)
    assert resp.status_code == 503, resp.text
    assert resp.headers["retry-after"] == "1"
    assert "Redis" in resp.json()["detail"]


def test_readiness_says_redis_is_unreachable(client: TestClient) -> None:
    ready = client.get("/readyz")
    assert (ready.status_code, ready.json()) == (503, {"detail": "Redis unreachable"})


MESSAGE = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("SendMessage", {"message": MESSAGE}),
        ("SendStreamingMessage", {"message": MESSAGE}),
        ("GetTask", {"id": TASK}),
        ("CancelTask", {"id": TASK}),
        ("SubscribeToTask", {"id": TASK}),
    ],
)
def test_an_a2a_call_needing_redis_is_an_internal_error_saying_what_to_do(
    client: TestClient, method: str, params: dict
) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    resp = client.post("/v1/a2a", json=body, headers={**AUTH, "A2A-Version": "1.0"})
    error = resp.json()["error"]
    assert error["code"] == -32603 and "send the request again shortly" in error["message"]
    assert "127.0.0.1" not in resp.text  # not the exception's text: the store's address
