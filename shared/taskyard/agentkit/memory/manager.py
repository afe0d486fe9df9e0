"""Memory per session id, in process: what an agent holds by default."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from taskyard.agentkit.memory.base import MessageInput, SessionId, as_messages
from taskyard.agentkit.memory.memory import Memory
from taskyard.agentkit.schema import AgentMessage

__all__ = ["MemoryManager"]


class MemoryManager:
    """One `Memory` per session id, created on first write; `recent_n` is every session's window."""

    def __init__(self, recent_n: int | None = None) -> None:
        self.recent_n = recent_n
        self.sessions: dict[SessionId, Memory] = {}

    def get(self, session_id: SessionId = 0) -> Memory | None:
        """The session's `Memory`, or None if the session has none."""
        return self.sessions.get(session_id)

    def get_memory(
        self, session_id: SessionId = 0, recent_n: int | None = None
    ) -> list[AgentMessage]:
        """The session's messages (empty for an unknown session)."""
        memory = self.sessions.get(session_id)
        return memory.get_memory(recent_n) if memory else []

    def add(self, messages: MessageInput, session_id: SessionId = 0) -> None:
        """Append to the session; refuse unrecognised input before creating anything."""
        checked = as_messages(messages)
        self._session(session_id).add(checked)

    def delete(self, index: int | Iterable[int], session_id: SessionId = 0) -> None:
        """Delete by position in the session; `IndexError` for an unknown position."""
        self._session(session_id).delete(index)

    def load(self, state: Any, session_id: SessionId = 0) -> None:
        """Replace the session's messages with saved ones."""
        self._session(session_id).load(state)

    def save(self, session_id: SessionId = 0) -> list[dict[str, Any]]:
        """The session's messages as JSON-serialisable dicts (empty for an unknown session)."""
        memory = self.sessions.get(session_id)
        return memory.save() if memory else []

    def reset(self, session_id: SessionId = 0) -> None:
        """Forget this session only."""
        self.sessions.pop(session_id, None)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self.sessions

    def _session(self, session_id: SessionId) -> Memory:
        if session_id not in self.sessions:
            self.sessions[session_id] = Memory(self.recent_n)
        return self.sessions[session_id]
