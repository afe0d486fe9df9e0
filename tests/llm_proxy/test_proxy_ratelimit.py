"""The proxy's per-tenant budgets in process, around the sync that shares them through Redis:
spending handed to a sync counts until the sync's totals come back (a request admitted during
the sync's round trip once saw none of it: a spent budget let it through), and a failed sync
gives it back to count again."""

from __future__ import annotations

import pytest

from services.llm_proxy.errors import RateLimited
from services.llm_proxy.limits.ratelimit import RateLimiter, Spending
from services.llm_proxy.limits.tenants import Tenant

ONE_REQUEST = Tenant("beta", rpm=1)
HUNDRED_TOKENS = Tenant("gamma", tpm=100)


def test_a_request_during_a_sync_still_sees_the_spending_handed_to_it() -> None:
    limiter = RateLimiter(window_s=86_400)
    limiter.admit(ONE_REQUEST)
    window, handed = limiter.take_local()  # the sync's pipeline is on its way to Redis
    assert handed == {"beta": Spending(requests=1)}
    with pytest.raises(RateLimited):
        limiter.admit(ONE_REQUEST)
    limiter.set_remote(window, {"beta": Spending(requests=1)})  # the totals, ours in them
    with pytest.raises(RateLimited):
        limiter.admit(ONE_REQUEST)


def test_tokens_handed_to_a_sync_count_too() -> None:
    limiter = RateLimiter(window_s=86_400)
    limiter.admit(HUNDRED_TOKENS)
    limiter.charge(HUNDRED_TOKENS, 100)
    limiter.take_local()
    with pytest.raises(RateLimited):
        limiter.admit(HUNDRED_TOKENS)


def _admitted(limiter: RateLimiter, tenant: Tenant) -> int:
    """How many more requests of `tenant` the limiter admits before it refuses one."""
    for count in range(100):
        try:
            limiter.admit(tenant)
        except RateLimited:
            return count
    raise AssertionError("never refused")


def test_the_totals_replace_what_was_syncing_rather_than_add_to_it() -> None:
    limiter = RateLimiter(window_s=86_400)
    three = Tenant("alpha", rpm=3)
    limiter.admit(three)
    window, _ = limiter.take_local()
    limiter.set_remote(window, {"alpha": Spending(requests=1)})
    assert _admitted(limiter, three) == 2  # 1 in the totals: 2 of the 3 left


def test_a_failed_sync_gives_the_spending_back_once() -> None:
    limiter = RateLimiter(window_s=86_400)
    two = Tenant("delta", rpm=2)
    limiter.admit(two)
    window, handed = limiter.take_local()
    limiter.give_back(window, handed)  # nothing reached Redis
    assert _admitted(limiter, two) == 1  # the one given back counts once, not twice or never
    assert limiter.take_local()[1] == {"delta": Spending(requests=2)}
