"""A session memory's size in tokens, kept between steps: a step counts only what the memory
gained since the last count, so the prompt of a long session is not counted whole each step.

The count holds while the memory only grows: its messages are never edited in place (the
aggregators' render cache relies on the same), and a memory that was rewritten (compacted,
reloaded from Redis) no longer holds the last counted message object, so it is counted again.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

from taskyard.agentkit.aggregators import DefaultAggregator
from taskyard.agentkit.schema import AgentMessage
from taskyard.agentkit.token_count import count_tokens

__all__ = ["MemorySize"]


class MemorySize:
    """How many of a memory's first messages were counted, for which model, and their tokens."""

    __slots__ = ("_counted", "_last", "_model", "_tokens")

    def __init__(self) -> None:
        self._counted = 0
        self._tokens = 0
        self._model = ""
        self._last: weakref.ref[AgentMessage] | None = None

    def count(
        self,
        messages: Sequence[AgentMessage],
        model: str,
        name: str,
        aggregator: DefaultAggregator,
    ) -> int:
        """The tokens of `messages` as `aggregator` renders them for the agent `name`."""
        if not self._holds(messages, model):
            self._counted, self._tokens, self._model = 0, 0, model
        for message in messages[self._counted :]:
            self._tokens += count_tokens(aggregator.rendered(message, name), model)
        self._counted = len(messages)
        self._last = weakref.ref(messages[-1]) if messages else None
        return self._tokens

    def _holds(self, messages: Sequence[AgentMessage], model: str) -> bool:
        """Whether `messages` still start with what was counted (the same objects)."""
        if model != self._model or self._counted > len(messages):
            return False
        if self._counted == 0:
            return True
        return self._last is not None and self._last() is messages[self._counted - 1]
