"""Memory per session id in Redis: the same interface as `MemoryManager`, so any worker can take
a session's next step. Each session is a Redis list of message JSON, oldest first."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import redis

from taskyard.agentkit.memory.base import (
    MessageInput,
    SessionId,
    as_messages,
    from_state,
    positions,
)
from taskyard.agentkit.schema import AgentMessage
from taskyard.plumbing import keys

__all__ = ["RedisMemory"]


class RedisMemory:
    """Session memories under ``session:{tenant}:{session_id}:memory`` (see
    `taskyard.plumbing.keys`)."""

    def __init__(
        self,
        client: redis.Redis,
        tenant: str = "default",
        recent_n: int | None = None,
        key: Callable[[SessionId], str] | None = None,
    ) -> None:
        self.client = client
        self.recent_n = recent_n
        self._key = key or (lambda session_id: keys.session_memory(tenant, str(session_id)))

    def get_memory(
        self, session_id: SessionId = 0, recent_n: int | None = None
    ) -> list[AgentMessage]:
        """The session's messages, read in one LRANGE."""
        window = recent_n if recent_n is not None else self.recent_n
        if window == 0:
            return []
        raw = self.client.lrange(self._key(session_id), -window if window else 0, -1)
        return [AgentMessage.model_validate_json(item) for item in raw]

    def add(self, messages: MessageInput, session_id: SessionId = 0) -> None:
        """Append in one RPUSH; refuse unrecognised input before writing anything."""
        checked = as_messages(messages)
        if checked:
            self.client.rpush(self._key(session_id), *(m.model_dump_json() for m in checked))

    def delete(self, index: int | Iterable[int], session_id: SessionId = 0) -> None:
        """Delete by position, atomically: mark the doomed items, then remove the marks."""
        key, marker = self._key(session_id), f"__deleted__:{uuid.uuid4().hex}"
        wanted = [index] if isinstance(index, int) else list(index)

        def mark_and_remove(pipe: redis.client.Pipeline) -> None:
            doomed = positions(wanted, pipe.llen(key))
            pipe.multi()
            for position in doomed:
                pipe.lset(key, position, marker)
            pipe.lrem(key, 0, marker)

        self.client.transaction(mark_and_remove, key)

    def load(self, state: Any, session_id: SessionId = 0) -> None:
        """Replace the session's messages in one MULTI/EXEC."""
        messages = from_state(state)
        key = self._key(session_id)
        with self.client.pipeline(transaction=True) as pipe:
            pipe.delete(key)
            if messages:
                pipe.rpush(key, *(m.model_dump_json() for m in messages))
            pipe.execute()

    def save(self, session_id: SessionId = 0) -> list[dict[str, Any]]:
        """The session's messages as JSON-serialisable dicts."""
        raw = self.client.lrange(self._key(session_id), 0, -1)
        return [json.loads(item) for item in raw]

    def reset(self, session_id: SessionId = 0) -> None:
        """Forget this session only."""
        self.client.delete(self._key(session_id))

    def __contains__(self, session_id: object) -> bool:
        if not isinstance(session_id, int | str):
            return False  # no session has such an id
        return bool(self.client.exists(self._key(session_id)))
