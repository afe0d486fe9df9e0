"""Token usage as the replicas report it.

The proxy keeps usage per tenant only: its metrics and the token budgets. A task's usage is
recorded once, by the agent worker, from the usage each response carries (the body, the
stream's usage chunk, the `X-Taskyard-Usage` header on non-streamed answers), in the same
write as the step that made the calls.
"""

from __future__ import annotations

from typing import Any

__all__ = ["tokens_of", "usage_header"]


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
