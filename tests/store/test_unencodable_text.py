"""Text no encoder takes (a lone surrogate) in what ends or reports on a task is made storable,
so a task can always be ended, with its reason told."""

from __future__ import annotations

from taskyard.runtime.events import EventKind
from taskyard.runtime.store import TaskStore
from taskyard.runtime.task import TaskRecord, TaskStatus


async def test_a_reason_holding_a_lone_surrogate_still_ends_the_task(store: TaskStore) -> None:
    record = TaskRecord(tenant="acme", session_id="s1", input="hi")
    await store.create(record)
    assert await store.publish(record.id, EventKind.TOKEN, {"delta": "a\udc80"})
    ended, _ = await store.end(record, TaskStatus.FAILED, error="step failed: \ud800")
    assert ended
    stored = await store.get(record.id)
    assert stored is not None and stored.error == "step failed: \ufffd"
    token, final = (await store.events(record.id))[-2:]
    assert token.data == {"delta": "a\ufffd"}
    assert final.data == {"status": "failed", "error": "step failed: \ufffd"}
