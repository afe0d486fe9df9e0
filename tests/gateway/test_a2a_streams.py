"""A2A's streams on the run's real Redis, the gateway's event hub and the store (no workers:
the test writes the task's events as the workers would): a stream ends when the task comes to
wait for a person, as A2A's streams do, and a subscription made while it waits follows it to
its end."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from a2a.server.context import ServerCallContext
from a2a.types import StreamResponse, SubscribeToTaskRequest, TaskState
from a2a.utils.proto_utils import to_stream_response

from services.gateway.event_hub import EventHub, reader_client
from services.gateway.resources.a2a.handler import Caller, TaskyardHandler
from services.gateway.resources.tasks.models import TaskAccepted, TaskCreate
from taskyard.plumbing.celery_app import make_celery
from taskyard.plumbing.settings import GatewaySettings
from taskyard.runtime.events import EventKind
from taskyard.runtime.store import TaskStore
from taskyard.runtime.task import TaskRecord, TaskStatus

HELD = {"step": 0, "calls": [{"id": "call-1", "tool": "IPythonInterpreter"}]}


async def _no_submissions(body: TaskCreate, key: str | None) -> TaskAccepted:
    raise AssertionError("nothing is sent here")


@pytest.fixture
async def handler(settings: GatewaySettings, store: TaskStore) -> AsyncIterator[TaskyardHandler]:
    hub = EventHub(reader_client(settings, "test-a2a"), store.r, keep_alive_s=0.2)
    caller = Caller("tenant-a", None, "http://gateway.test/", _no_submissions)
    yield TaskyardHandler(caller, store, hub, make_celery(settings), settings)
    await hub.close()


def _states(events: list[StreamResponse]) -> list[str]:
    return [TaskState.Name(e.task.status.state if e.HasField("task") else
                           e.status_update.status.state)
            for e in events if not e.HasField("artifact_update")]  # fmt: skip


async def test_a_subscription_stops_when_the_task_comes_to_wait(
    handler: TaskyardHandler, store: TaskStore
) -> None:
    record = TaskRecord(tenant="tenant-a", session_id="s-held-2", input="hi")
    assert (await store.create(record)).outcome == "created"
    stream = handler.on_subscribe_to_task(SubscribeToTaskRequest(id=record.id), ServerCallContext())
    first = to_stream_response(await anext(stream))  # the snapshot: read before the hold
    assert first.task.status.state == TaskState.TASK_STATE_SUBMITTED
    await store.publish(record.id, EventKind.APPROVAL_REQUESTED, HELD)
    await store.publish(record.id, EventKind.APPROVAL_DECIDED,
                        {"call_id": "call-1", "state": "approved"})  # fmt: skip
    async with asyncio.timeout(30):  # a stream that went on would wait here for good
        rest = [to_stream_response(event) async for event in stream]
    assert _states(rest) == ["TASK_STATE_INPUT_REQUIRED"]  # and no more: the stream ended
    note = rest[0].status_update.status.message.parts[0].text
    assert "waiting for a person's approval" in note
    # Subscribed again while it waits: followed past what it says meanwhile, to the end.
    again = handler.on_subscribe_to_task(SubscribeToTaskRequest(id=record.id), ServerCallContext())
    snapshot = to_stream_response(await anext(again))
    assert snapshot.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    await store.publish(record.id, EventKind.RATE_LIMITED, {"reason": "budget", "retry_in_s": 1})
    await store.end(record, TaskStatus.SUCCEEDED, result="done")
    after = [to_stream_response(event) async for event in again]
    assert _states(after) == ["TASK_STATE_INPUT_REQUIRED", "TASK_STATE_COMPLETED"]
    assert after[-2].HasField("artifact_update")  # the answer, then the end
