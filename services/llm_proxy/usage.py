"""Token usage per tenant and per task, as the replicas report it.

Per-tenant totals feed the metrics and the token budgets; per-task totals are flushed to
Redis (`task_usage_key`) by the background sync, where the agent worker reads what a task
has spent. Each response also carries its own usage (the body, the stream's usage chunk when
asked, and the `X-Taskyard-Usage` header on non-streamed answers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["TaskUsage", "UsageLedger", "task_usage_key", "tokens_of", "usage_header"]


def task_usage_key(task_id: str) -> str:
    """The Redis hash of a task's token usage: prompt_tokens, completion_tokens, requests."""
    return f"llm_usage:task:{task_id}"


@dataclass(slots=True)
class TaskUsage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0


def tokens_of(usage: dict[str, Any] | None) -> tuple[int, int]:
    """(prompt, completion) tokens of an OpenAI usage object; zeros when absent."""
    if not isinstance(usage, dict):
        return 0, 0
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    return (
        prompt if isinstance(prompt, int) else 0,
        completion if isinstance(completion, int) else 0,
    )


def usage_header(prompt: int, completion: int) -> bytes:
    """The `X-Taskyard-Usage` header value."""
    return b"prompt_tokens=%d, completion_tokens=%d" % (prompt, completion)


class UsageLedger:
    """Accumulates task usage until the next flush; `enabled=False` (nothing flushes it)
    keeps nothing."""

    def __init__(self, enabled: bool = True) -> None:
        self._enabled = enabled
        self._pending: dict[str, TaskUsage] = {}

    def record(self, task_id: str | None, prompt: int, completion: int) -> None:
        """Add one response's tokens to its task."""
        if not task_id or not self._enabled:
            return
        entry = self._pending.get(task_id)
        if entry is None:
            entry = self._pending[task_id] = TaskUsage()
        entry.prompt_tokens += prompt
        entry.completion_tokens += completion
        entry.requests += 1

    def give_back(self, pending: dict[str, TaskUsage]) -> None:
        """Take back usage a failed flush could not deliver."""
        for task_id, usage in pending.items():
            entry = self._pending.setdefault(task_id, TaskUsage())
            entry.prompt_tokens += usage.prompt_tokens
            entry.completion_tokens += usage.completion_tokens
            entry.requests += usage.requests

    def take_pending(self) -> dict[str, TaskUsage]:
        """Hand the unflushed usage to the sync and start afresh."""
        pending, self._pending = self._pending, {}
        return pending
