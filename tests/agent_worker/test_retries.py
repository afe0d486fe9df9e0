"""After a transient model error: retry later (after the server's Retry-After), saying so when
it is the tenant's rate limit, or give up with the reason; a pure decision."""

from __future__ import annotations

from services.agent_worker.retries import GiveUp, RetryLater, after_model_error
from taskyard.agentkit.llms import LLMError

LIMITED = "model call failed: 429 request rate limit (1 requests per 60s) of tenant 'b' reached"


def _limited(retry_after: float | None) -> LLMError:
    return LLMError(LIMITED, status_code=429, code="rate_limit_exceeded", retry_after=retry_after)


def test_a_spent_rate_limit_waits_for_its_reset_and_says_so() -> None:
    decision = after_model_error(_limited(42), retries=0, max_retries=8, max_wait_s=120)
    assert decision == RetryLater(42, {"reason": LIMITED, "retry_in_s": 42})


def test_a_rate_limit_that_resets_too_late_fails_the_task_at_once() -> None:
    decision = after_model_error(_limited(3600), retries=0, max_retries=8, max_wait_s=120)
    assert isinstance(decision, GiveUp)
    assert decision.reason.startswith(LIMITED)
    assert "resets in 3600s" in decision.reason and "RATE_LIMIT_MAX_WAIT_S=120" in decision.reason


def test_a_rate_limit_still_spent_after_the_retries_fails_with_the_reason() -> None:
    decision = after_model_error(_limited(5), retries=8, max_retries=8, max_wait_s=120)
    assert decision == GiveUp(f"{LIMITED}; still so after 8 retries")


def test_other_transient_errors_back_off_without_a_notice() -> None:
    busy = LLMError("model call failed: 503 busy", status_code=503)
    assert after_model_error(busy, 3, 8, 120) == RetryLater(8)
    assert after_model_error(busy, 7, 8, 120) == RetryLater(30)  # capped
    slow = LLMError("model call failed: 503", status_code=503, retry_after=20)
    assert after_model_error(slow, 0, 8, 120) == RetryLater(20)
    full = LLMError("model call failed: 429 queue full", status_code=429, code="overloaded")
    assert after_model_error(full, 0, 8, 120) == RetryLater(1)  # a busy proxy, not a budget
    assert after_model_error(busy, 8, 8, 120) == GiveUp(
        "model upstream unavailable after 8 retries: model call failed: 503 busy"
    )
