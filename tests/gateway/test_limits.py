"""What the gateway refuses, and when: no key (401) before any body is read, a body over the
limit (413) before or while it arrives, invalid bodies (422) with a short echo at most, and
text no store can hold (a lone surrogate)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
import redis
from fastapi.testclient import TestClient
from gateway_support import queued_steps

from services.gateway.app import create_app
from taskyard.plumbing.settings import GatewaySettings
from taskyard.runtime.store import TaskStore

AUTH = {"Authorization": "Bearer key-a"}
JSON = {"Content-Type": "application/json"}


def _post(client: TestClient, body: bytes | Iterator[bytes], **headers: str) -> httpx.Response:
    return client.post("/v1/tasks", content=body, headers={**AUTH, **JSON, **headers})


async def _asgi(
    settings: GatewaySettings, headers: list[tuple[bytes, bytes]]
) -> tuple[int, int, dict[str, Any]]:
    """POST /v1/tasks straight to the ASGI app: (status, body reads, JSON answer)."""
    reads, sent = 0, []

    async def receive() -> dict[str, Any]:
        nonlocal reads
        reads += 1
        return {"type": "http.request", "body": b'{"input": "hi"}', "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": "/v1/tasks", "raw_path": b"/v1/tasks",
             "root_path": "", "query_string": b"", "server": ("127.0.0.1", 80),
             "client": ("127.0.0.1", 5000),
             "headers": [(b"content-type", b"application/json"), *headers]}  # fmt: skip
    await create_app(settings)(scope, receive, send)
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], reads, orjson.loads(body)


@pytest.mark.parametrize("authorization", [None, b"Bearer nope", b"key-a", b"Basic key-a"])
async def test_no_body_is_read_without_a_valid_key(
    settings: GatewaySettings, authorization: bytes | None
) -> None:
    headers = [(b"authorization", authorization)] if authorization else []
    status, reads, answer = await _asgi(settings, [*headers, (b"content-length", b"15")])
    assert (status, reads) == (401, 0)
    assert "API key" in answer["detail"]


async def test_a_body_announced_over_the_limit_is_413_before_it_is_read(
    settings: GatewaySettings,
) -> None:
    length = str(settings.gateway_max_body_bytes + 1).encode()
    headers = [(b"authorization", b"Bearer key-a"), (b"content-length", length)]
    status, reads, answer = await _asgi(settings, headers)
    assert (status, reads) == (413, 0)
    assert answer == {"detail": f"request body over {settings.gateway_max_body_bytes} bytes"}


def test_an_unauthenticated_malformed_body_is_401_not_422(client: TestClient) -> None:
    resp = _post(client, b"{not json", Authorization="Bearer nope")
    assert resp.status_code == 401


def test_a_10_mb_input_is_413(client: TestClient, settings: GatewaySettings) -> None:
    resp = _post(client, orjson.dumps({"input": "x" * 10_000_000}))
    assert resp.status_code == 413
    assert resp.json() == {"detail": f"request body over {settings.gateway_max_body_bytes} bytes"}
    assert queued_steps(settings) == []


def test_a_chunked_body_is_cut_off_at_the_limit(
    client: TestClient, settings: GatewaySettings
) -> None:
    def chunks() -> Iterator[bytes]:  # no Content-Length: the size shows only as it arrives
        yield b'{"input": "'
        yield from (b"x" * 65_536 for _ in range(200))
        yield b'"}'

    resp = _post(client, chunks())
    assert resp.status_code == 413
    assert "request body over" in resp.json()["detail"]
    assert queued_steps(settings) == []


def test_the_body_limit_is_a_setting(settings: GatewaySettings) -> None:
    small = settings.model_copy(update={"gateway_max_body_bytes": 2048})
    with TestClient(create_app(small)) as client:
        assert _post(client, orjson.dumps({"input": "x" * 2000})).status_code == 202
        assert _post(client, orjson.dumps({"input": "x" * 2100})).status_code == 413


@pytest.mark.parametrize(
    "body",
    [
        {"input": "x" * 200_001},
        {"input": "hi", "agent": {"system_prompt": "y" * 100_001}},
        {"input": "hi", "k" * 100_000: 1},
        {"input": ["z" * 100_000]},
        {"agent": {"tools": ["t" * 100_000] * 33}},
    ],
)
def test_a_422_echoes_a_short_prefix_at_most(client: TestClient, body: dict) -> None:
    resp = client.post("/v1/tasks", json=body, headers=AUTH)
    assert resp.status_code == 422
    assert len(resp.content) < 300 * len(resp.json()["detail"])
    for problem in resp.json()["detail"]:
        assert len(str(problem.get("input", ""))) <= 101 and len(str(problem["loc"])) < 300


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"input": "hi", "agent": {"model": "m" * 257}}, ["body", "agent", "model"]),
        ({"input": "hi", "agent": {"name": "n" * 65}}, ["body", "agent", "name"]),
        ({"input": "hi", "agent": {"agent": "a" * 129}}, ["body", "agent", "agent"]),
        ({"input": "hi", "agent": {"tools": ["t" * 129]}}, ["body", "agent", "tools", 0]),
        ({"input": "hi", "agent": {"system_prompt": "s" * 100_001}},
         ["body", "agent", "system_prompt"]),
        ({"input": "i" * 200_001}, ["body", "input"]),
        ({"input": "hi", "session_id": "s" * 129}, ["body", "session_id"]),
    ],
)  # fmt: skip
def test_every_free_text_field_has_a_limit(client: TestClient, body: dict, loc: list) -> None:
    resp = client.post("/v1/tasks", json=body, headers=AUTH)
    assert resp.status_code == 422
    assert [p["loc"] for p in resp.json()["detail"]] == [loc]


def test_an_idempotency_key_has_a_limit(client: TestClient) -> None:
    resp = client.post(
        "/v1/tasks", json={"input": "hi"}, headers={**AUTH, "Idempotency-Key": "k" * 257}
    )
    assert resp.status_code == 422
    assert resp.json()["detail"][0]["loc"] == ["header", "idempotency-key"]


@pytest.mark.parametrize(
    "agent",
    [{"max_steps": True}, {"max_steps": "3"}, {"max_steps": 2.5}, {"temperature": True},
     {"temperature": "0.5"}, {"deadline_s": True}, {"deadline_s": "30"}],
)  # fmt: skip
def test_numbers_are_numbers(client: TestClient, settings: GatewaySettings, agent: dict) -> None:
    resp = client.post("/v1/tasks", json={"input": "hi", "agent": agent}, headers=AUTH)
    assert resp.status_code == 422
    assert resp.json()["detail"][0]["loc"] == ["body", "agent", next(iter(agent))]
    assert queued_steps(settings) == []


@pytest.mark.parametrize(
    "body",
    [
        rb'{"input": "\ud800"}',
        rb'{"input": "hi", "agent": {"system_prompt": "a\udfffb"}}',
        rb'{"input": "hi", "session_id": "\ud800"}',
        rb'{"input": "hi", "agent": {"tools": ["\udbff"]}}',
        rb'{"input": "hi", "\ud800": 1}',
        rb'{"input": "\ude00\ud83d"}',
    ],
)
def test_a_lone_surrogate_is_invalid_json(
    client: TestClient, settings: GatewaySettings, body: bytes
) -> None:
    resp = _post(client, body)
    assert resp.status_code == 422
    (problem,) = resp.json()["detail"]
    assert problem["type"] == "json_invalid" and "surrogate" in problem["ctx"]["error"]
    assert queued_steps(settings) == []


def test_an_escaped_surrogate_pair_is_the_character(
    client: TestClient, redis_client: redis.Redis
) -> None:
    resp = _post(client, rb'{"input": "smile \ud83d\ude00"}')
    assert resp.status_code == 202
    assert redis_client.hget(f"task:{resp.json()['id']}", "input") == "smile \U0001f600"


@pytest.mark.parametrize(
    "body", [b'{"input": NaN}', b'{"input": "hi", "agent": {"temperature": 1e999}}']
)
def test_nan_and_infinity_are_invalid_json(client: TestClient, body: bytes) -> None:
    assert _post(client, body).status_code == 422


def test_an_unexpected_failure_is_a_500_in_the_same_shape(
    settings: GatewaySettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(*_: object, **__: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(TaskStore, "create", broken)
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        resp = client.post("/v1/tasks", json={"input": "hi"}, headers=AUTH)
        assert (resp.status_code, resp.json()) == (500, {"detail": "internal error"})
