"""Per-tenant request and token budgets per window, decided in process, shared through Redis.

The request path only reads and bumps local counters. A background sync (see `sync.py`) adds
each tenant's local spending to a per-minute Redis counter and reads back the total of every
proxy instance, so all instances converge on one budget within a sync interval without a
round trip per request.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from services.llm_proxy.errors import RateLimited
from services.llm_proxy.limits.tenants import Tenant

__all__ = ["RateLimiter", "Spending"]


@dataclass(slots=True)
class Spending:
    requests: int = 0
    tokens: int = 0


class RateLimiter:
    """Fixed windows (a minute by default) per tenant: remote totals seen, plus spending handed
    to a sync whose totals have not come back yet, plus local unsynced spending. (Without the
    middle term a request admitted during a sync's round trip saw neither its instance's
    spending nor the totals holding it: a spent budget let it through.)"""

    def __init__(self, window_s: float = 60.0) -> None:
        self.window_s = window_s
        self.window = self._current_window()
        self._remote: dict[str, Spending] = {}
        self._local: dict[str, Spending] = {}
        self._syncing: dict[str, Spending] = {}  # handed to a sync, not in `_remote` yet
        self._seen: set[str] = set()  # limited tenants active this window, synced each time

    def _current_window(self) -> int:
        return int(time.time() // self.window_s)

    def admit(self, tenant: Tenant) -> None:
        """Count a request against `tenant`, or raise `RateLimited` if its budget is spent."""
        if not tenant.rpm and not tenant.tpm:
            return
        self._roll()
        spent = self._spent_so_far(tenant.name)
        self._seen.add(tenant.name)
        if tenant.rpm and spent.requests >= tenant.rpm:
            raise self._spent(tenant, f"request rate limit ({tenant.rpm} requests")
        if tenant.tpm and spent.tokens >= tenant.tpm:
            raise self._spent(tenant, f"token rate limit ({tenant.tpm} tokens")
        self._local.setdefault(tenant.name, Spending()).requests += 1

    def _spent_so_far(self, name: str) -> Spending:
        parts = (self._remote.get(name), self._syncing.get(name), self._local.get(name))
        return Spending(sum(p.requests for p in parts if p), sum(p.tokens for p in parts if p))

    def charge(self, tenant: Tenant, tokens: int) -> None:
        """Count tokens a finished request used."""
        if tenant.tpm:
            self._roll()
            self._local.setdefault(tenant.name, Spending()).tokens += tokens

    def take_local(self) -> tuple[int, dict[str, Spending]]:
        """Hand the unsynced spending of every tenant active this window (zero included, so
        the sync reads back what other instances spent) to the sync; it counts as syncing
        until the sync's totals (`set_remote`) or its failure (`give_back`) come back."""
        self._roll()
        local, self._local = self._local, {}
        handed = {name: local.get(name) or Spending() for name in self._seen}
        for name, spent in handed.items():
            syncing = self._syncing.setdefault(name, Spending())
            syncing.requests += spent.requests
            syncing.tokens += spent.tokens
        return self.window, handed

    def give_back(self, window: int, spending: Mapping[str, Spending]) -> None:
        """Take back spending a failed sync could not deliver."""
        if window != self.window:
            return
        self._syncing.clear()
        for name, spent in spending.items():
            local = self._local.setdefault(name, Spending())
            local.requests += spent.requests
            local.tokens += spent.tokens

    def set_remote(self, window: int, totals: Mapping[str, Spending]) -> None:
        """Record every instance's totals as read back from Redis."""
        if window == self.window:
            self._remote.update(totals)  # they hold what was syncing
            self._syncing.clear()

    def _roll(self) -> None:
        window = self._current_window()
        if window != self.window:
            self.window = window
            self._remote.clear()
            self._syncing.clear()
            self._local.clear()
            self._seen.clear()

    def _spent(self, tenant: Tenant, limit: str) -> RateLimited:
        window = f"{self.window_s:g}s"
        return RateLimited(
            f"{limit} per {window}) of tenant {tenant.name!r} reached",
            retry_after=self._seconds_left(),
        )

    def _seconds_left(self) -> float:
        return (self.window + 1) * self.window_s - time.time()
