"""What every per-session memory offers, and the input rules they share.

Memories accept an `AgentMessage`, a string (a user message) or a list/tuple of those, and
refuse anything else with a `TypeError` (Lagent dropped such input silently).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from taskyard.agentkit.schema import AgentMessage

__all__ = [
    "MessageInput",
    "SessionId",
    "SessionMemory",
    "as_messages",
    "from_state",
    "positions",
]

SessionId = int | str
# A list is invariant: a list of messages alone, or of strs alone, is named apart.
MessageInput = (
    AgentMessage
    | str
    | list[AgentMessage]
    | list[str]
    | list[AgentMessage | str]
    | tuple[AgentMessage | str, ...]
)


@runtime_checkable
class SessionMemory(Protocol):
    """Messages kept per session id; `MemoryManager` and `RedisMemory` implement it."""

    def get_memory(
        self, session_id: SessionId = 0, recent_n: int | None = None
    ) -> list[AgentMessage]:
        """The session's messages, oldest first; the last `recent_n` only when given."""
        ...

    def add(self, messages: MessageInput, session_id: SessionId = 0) -> None:
        """Append messages to the session."""
        ...

    def delete(self, index: int | Iterable[int], session_id: SessionId = 0) -> None:
        """Delete messages by position (positions refer to the list before the call)."""
        ...

    def load(self, state: Any, session_id: SessionId = 0) -> None:
        """Replace the session's messages with saved ones."""
        ...

    def save(self, session_id: SessionId = 0) -> list[dict[str, Any]]:
        """The session's messages as JSON-serialisable dicts."""
        ...

    def reset(self, session_id: SessionId = 0) -> None:
        """Forget the session."""
        ...

    def __contains__(self, session_id: object) -> bool: ...


def as_messages(value: Any) -> list[AgentMessage]:
    """Normalise memory input to a list of messages; raise `TypeError` on anything else."""
    items = list(value) if isinstance(value, list | tuple) else [value]
    return [_as_message(item) for item in items]


def _as_message(item: Any) -> AgentMessage:
    if isinstance(item, AgentMessage):
        return item
    if isinstance(item, str):
        return AgentMessage(sender="user", content=item)
    raise TypeError(
        f"memory takes an AgentMessage, a str or a list of them, not {type(item).__name__}: "
        f"{item!r:.80}"
    )


def from_state(state: Any) -> list[AgentMessage]:
    """Messages from saved state: a list of dicts or messages (or one dict); else `TypeError`."""
    items = [state] if isinstance(state, dict) else state
    if not isinstance(items, list | tuple):
        raise TypeError(f"memory state must be a list of message dicts, not {type(state).__name__}")
    return [_from_item(item) for item in items]


def _from_item(item: Any) -> AgentMessage:
    if isinstance(item, AgentMessage):
        return item.model_copy(deep=True)
    if isinstance(item, dict):
        return AgentMessage.model_validate(item)
    raise TypeError(f"a saved message must be a dict or an AgentMessage, not {type(item).__name__}")


def positions(index: int | Iterable[int], length: int) -> list[int]:
    """Distinct non-negative positions for `delete`; `IndexError` if one is out of range."""
    wanted = [index] if isinstance(index, int) else list(index)
    result = set()
    for i in wanted:
        if not isinstance(i, int):
            raise TypeError(f"memory positions are ints, not {type(i).__name__}")
        if not -length <= i < length:
            raise IndexError(f"memory position {i} out of range for {length} messages")
        result.add(i % length)
    return sorted(result)
