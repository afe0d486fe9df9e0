"""What the store's tests share: a task record, one made, a tool result, a broker queue."""

from __future__ import annotations

import redis

from taskyard.agentkit.schema import ActionReturn, AgentMessage
from taskyard.runtime.store import TaskStore
from taskyard.runtime.task import TaskRecord


def new_record(**kw: object) -> TaskRecord:
    return TaskRecord(tenant="acme", session_id="s1", input="hi", **kw)


async def created(store: TaskStore, **kw: object) -> TaskRecord:
    record = new_record(**kw)
    assert (await store.create(record)).outcome == "created"
    return record


def tool_result(call_id: str, text: str = "42") -> AgentMessage:
    ret = ActionReturn(type="T", result=[{"type": "text", "content": text}])
    return AgentMessage(sender="T", content=ret, extra_info={"tool_call_id": call_id})


def broker_queue(redis_server: str, queue: str) -> list[str]:
    return redis.Redis.from_url(f"{redis_server}/1", decode_responses=True).lrange(queue, 0, -1)
