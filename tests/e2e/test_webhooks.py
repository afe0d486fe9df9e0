"""Webhooks through the real stack: a receiver that fails twice gets the same signed delivery
until it accepts, state changes arrive in order, and the task shows what was delivered."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from e2e_support import HookReceiver, delivered, wait_status

from devstack.stack import LocalStack
from taskyard.client import TaskyardClient
from taskyard.client.webhooks import verify

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    env = {"TASKYARD_WEBHOOK_RETRY_BASE_S": "0.2", "TASKYARD_SWEEP_INTERVAL_S": "1"}
    stack = LocalStack(sandbox_backend="local", extra_env=env).start()
    yield stack
    stack.stop()


def test_a_failing_receiver_gets_the_same_signed_delivery_until_it_accepts(
    stack: LocalStack, receiver: HookReceiver
) -> None:
    client = TaskyardClient(stack.gateway_url, stack.api_key)
    receiver.codes = [500, 502]
    hook = {"url": receiver.url, "events": ["waiting_tools", "succeeded"]}
    task_id = client.submit("hello", webhook=hook)["id"]  # the model calls a tool first
    assert wait_status(client, task_id)["status"] == "succeeded"
    told = delivered(client, task_id, 2)
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
