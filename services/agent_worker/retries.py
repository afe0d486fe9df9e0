"""What a step does after a model call failed with an error worth trying again: retry later
(after the server's Retry-After when it gave one), or give up with the reason.

A spent rate limit of the task's tenant is said on the task's event stream while the task
waits (a `rate_limited` event), and fails the task at once when the limit resets later than
is worth waiting for: never a task that stands still without a word.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from taskyard.agentkit.llms import LLMError

__all__ = ["GiveUp", "RetryLater", "after_model_error"]

_MAX_BACKOFF_S = 30.0


@dataclass(frozen=True, slots=True)
class RetryLater:
    countdown_s: float
    notice: dict[str, Any] | None = None  # the `rate_limited` event's data, if it is one


@dataclass(frozen=True, slots=True)
class GiveUp:
    reason: str


def after_model_error(
    error: LLMError, retries: int, max_retries: int, max_wait_s: float
) -> RetryLater | GiveUp:
    """The decision for a transient `error` after `retries` retries of the step."""
    backoff = min(2.0**retries, _MAX_BACKOFF_S)
    wait = max(backoff, error.retry_after or 0.0)
    if not error.rate_limited:
        if retries >= max_retries:
            return GiveUp(f"model upstream unavailable after {max_retries} retries: {error}")
        return RetryLater(wait)
    if wait > max_wait_s:
        return GiveUp(
            f"{error}; the limit resets in {wait:.0f}s, longer than a task waits for it "
            f"(TASKYARD_LLM_RATE_LIMIT_MAX_WAIT_S={max_wait_s:.0f})"
        )
    if retries >= max_retries:
        return GiveUp(f"{error}; still so after {max_retries} retries")
    return RetryLater(wait, {"reason": str(error), "retry_in_s": round(wait, 1)})
