"""One session's messages, in process."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from taskyard.agentkit.memory.base import MessageInput, as_messages, from_state, positions
from taskyard.agentkit.schema import AgentMessage

__all__ = ["Memory"]


class Memory:
    """An ordered list of messages with an optional default window of the last `recent_n`."""

    def __init__(self, recent_n: int | None = None) -> None:
        self.messages: list[AgentMessage] = []
        self.recent_n = recent_n

    def get_memory(
        self,
        recent_n: int | None = None,
        filter_func: Callable[[int, AgentMessage], bool] | None = None,
    ) -> list[AgentMessage]:
        """The messages (a new list), windowed to the last `recent_n`, then filtered."""
        window = recent_n if recent_n is not None else self.recent_n
        if window is None:
            messages = list(self.messages)
        else:
            messages = self.messages[max(len(self.messages) - window, 0) :]
        if filter_func is not None:
            messages = [m for i, m in enumerate(messages) if filter_func(i, m)]
        return messages

    def add(self, messages: MessageInput) -> None:
        """Append; a str becomes a user message; anything else raises `TypeError`."""
        self.messages.extend(as_messages(messages))

    def delete(self, index: int | Iterable[int]) -> None:
        """Delete by position; all positions refer to the list before the call."""
        doomed = set(positions(index, len(self.messages)))
        self.messages = [m for i, m in enumerate(self.messages) if i not in doomed]

    def load(self, state: Any) -> None:
        """Replace the messages with saved ones (dicts from `save`, or messages)."""
        self.messages = from_state(state)

    def save(self) -> list[dict[str, Any]]:
        """The messages as JSON-serialisable dicts."""
        return [m.model_dump(mode="json") for m in self.messages]

    def __len__(self) -> int:
        return len(self.messages)
