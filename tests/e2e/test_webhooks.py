"""Webhooks through the real stack: a receiver that fails twice gets the same signed delivery
until it accepts, state changes arrive in order, and the task shows what was delivered."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from e2e_support import wait_status

from devstack.stack import LocalStack
from shared.client import TaskyardClient
from shared.webhooks import verify

pytestmark = pytest.mark.e2e


class _Receiver(ThreadingHTTPServer):
    """Answers each POST with the next scripted status code (200 once they run out)."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.codes: list[int] = []
        self.received: list[tuple[dict[str, str], bytes]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hook"


class _Handler(BaseHTTPRequestHandler):
    server: _Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        self.server.received.append(({k.lower(): v for k, v in self.headers.items()}, body))
        self.send_response(self.server.codes.pop(0) if self.server.codes else 200)
        self.end_headers()

    def log_message(self, *_: object) -> None:  # quiet
        pass


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    env = {"TASKYARD_WEBHOOK_RETRY_BASE_S": "0.2", "TASKYARD_SWEEP_INTERVAL_S": "1"}
    stack = LocalStack(sandbox_backend="local", extra_env=env).start()
    yield stack
    stack.stop()


@pytest.fixture
def receiver() -> Iterator[_Receiver]:
    server = _Receiver()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def _delivered(client: TaskyardClient, task_id: str, count: int) -> list[dict]:
    deadline = time.monotonic() + 30
    while True:
        told = client.get(task_id)["webhook_deliveries"]
        if sum(t["state"] == "delivered" for t in told) >= count:
            return told
        assert time.monotonic() < deadline, told
        time.sleep(0.1)


def test_a_failing_receiver_gets_the_same_signed_delivery_until_it_accepts(
    stack: LocalStack, receiver: _Receiver
) -> None:
    client = TaskyardClient(stack.gateway_url, stack.api_key)
    receiver.codes = [500, 502]
    hook = {"url": receiver.url, "events": ["waiting_tools", "succeeded"]}
    task_id = client.submit("hello", webhook=hook)["id"]  # the model calls a tool first
    assert wait_status(client, task_id)["status"] == "succeeded"
    told = _delivered(client, task_id, 2)
    assert [(t["type"], t["state"]) for t in told] == [
        ("task.waiting_tools", "delivered"), ("task.succeeded", "delivered")
    ]  # fmt: skip
    assert told[0]["attempts"] == 3 and told[1]["attempts"] == 1
    secret = client.webhook_secret()
    for headers, body in receiver.received:
        verify(secret, headers, body)
    ids = [headers["webhook-id"] for headers, _ in receiver.received]
    assert ids == [told[0]["event_id"]] * 3 + [told[1]["event_id"]]
    final = json.loads(receiver.received[-1][1])
    assert final["type"] == "task.succeeded"
    assert final["data"]["task_id"] == task_id and final["data"]["status"] == "succeeded"
    client.close()
