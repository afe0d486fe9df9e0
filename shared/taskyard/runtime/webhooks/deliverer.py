"""The delivery job: a task's pending webhook events delivered in order, each failure retried
with exponential backoff and jitter for a day (at least once), addresses the guard refuses
never tried again."""

from __future__ import annotations

import random
import ssl
import time
from dataclasses import dataclass
from typing import Any

import httpx

from taskyard.agentkit.actions.web import (
    AddressPolicy,
    BlockedAddress,
    GuardedNetwork,
    GuardedTransport,
)
from taskyard.plumbing import keys
from taskyard.plumbing.settings import WebhookSettings
from taskyard.runtime.events import EventKind
from taskyard.runtime.store import TaskStore
from taskyard.runtime.task import TaskRecord
from taskyard.runtime.webhooks import ledger
from taskyard.runtime.webhooks.payloads import delivery
from taskyard.runtime.webhooks.tenant_secrets import tenant_secret

__all__ = ["Deliverer", "Outcome"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a delivery job did: all delivered, or look again in `retry_in_s`."""

    retry_in_s: float | None = None


class Deliverer:
    """Delivers a task's pending webhook events, in order, one job at a time per task.

    Each event's attempts and next try are kept with its delivery record, so a duplicate or
    early job never tries an event before its backoff is over. While events are pending the
    task stays in `WEBHOOKS_DUE` (scored by when to look again), which the sweep reads:
    long backoffs wait there rather than as Celery countdowns (those outliving the broker's
    visibility timeout would be redelivered), and a lost job is sent again."""

    def __init__(self, store: TaskStore, settings: WebhookSettings) -> None:
        self.store = store
        self.settings = settings
        policy = AddressPolicy(allow_private=settings.webhook_allow_private)
        network = GuardedNetwork(policy)
        transport = GuardedTransport(network, ssl.create_default_context())
        self.http = httpx.AsyncClient(transport=transport, timeout=settings.webhook_timeout_s)

    async def deliver(self, task_id: str) -> Outcome:
        hold_s = self.settings.webhook_timeout_s * 4
        if not await self.store.try_lock(keys.task_webhook_lock(task_id), hold_s):
            return Outcome(retry_in_s=1.0)  # another job delivers now; look again after it
        try:
            # Should this job die mid-way, the sweep sends another once the lock is gone.
            await ledger.mark_due(self.store, task_id, time.time() + hold_s)
            outcome = await self._pending(task_id)
            if outcome.retry_in_s is None:
                await ledger.clear_due(self.store, task_id)
            else:
                await ledger.mark_due(self.store, task_id, time.time() + outcome.retry_in_s)
            return outcome
        finally:
            await self.store.r.delete(keys.task_webhook_lock(task_id))

    async def due(self, now: float) -> list[str]:
        """Tasks whose webhook events should be looked at again by `now` (`ledger.due`)."""
        return await ledger.due(self.store, now)

    async def _pending(self, task_id: str) -> Outcome:
        record = await self.store.get(task_id)
        if record is None or record.webhook is None:
            return Outcome()
        cursor = await ledger.cursor(self.store, task_id)
        for event in await self.store.events(task_id, after=cursor):
            wanted = (
                event.kind == EventKind.STATUS and event.data["status"] in record.webhook.events
            )
            if wanted and (wait := await self._deliver_one(record, event.id, event.data)):
                return Outcome(retry_in_s=wait)
            await ledger.advance(self.store, task_id, event.id)
        return Outcome()

    async def _deliver_one(
        self, record: TaskRecord, event_id: str, data: dict[str, Any]
    ) -> float | None:
        """Try one event unless its backoff is still running; the seconds to wait before
        the next try, or None when done with it (delivered, or given up for good)."""
        assert record.webhook is not None
        before = await ledger.entry(self.store, record.id, event_id)
        attempts = before["attempts"] if before else 0
        if before and (wait := float(before["next_at"]) - time.time()) > 0:
            return wait
        secret = await tenant_secret(self.store, record.tenant)
        sent = delivery(record, record.webhook, event_id, data, secret)
        entry = {"event_id": event_id, "type": f"task.{data['status']}",
                 "attempts": attempts + 1, "at": time.time(), "next_at": 0.0}  # fmt: skip
        try:
            response = await self.http.post(record.webhook.url, content=sent.body,
                                             headers=sent.headers)  # fmt: skip
            code, error = response.status_code, "" if response.is_success else response.text[:200]
        except BlockedAddress as exc:  # an address the guard refuses will not become allowed
            await self._record(record.id, entry, "refused", None, str(exc))
            return None
        except httpx.HTTPError as exc:
            code, error = None, f"{type(exc).__name__}: {exc}"[:200] or type(exc).__name__
        if code is not None and 200 <= code < 300:
            await self._record(record.id, entry, "delivered", code, "")
            return None
        if attempts + 1 >= self.max_attempts:
            await self._record(record.id, entry, "failed", code, error)
            return None
        wait = self._backoff(attempts)
        entry["next_at"] = time.time() + wait
        await self._record(record.id, entry, "retrying", code, error)
        return wait

    async def _record(
        self, task_id: str, entry: dict[str, Any], state: str, code: int | None, error: str
    ) -> None:
        outcome = {"state": state, "status_code": code, "error": error or None}
        await ledger.record(self.store, task_id, {**entry, **outcome})

    @property
    def max_attempts(self) -> int:
        """Attempts that fit in the retry window with the backoff (about a day by default)."""
        s, total, attempts = self.settings, 0.0, 0
        while total < s.webhook_retry_for_s:
            total += min(s.webhook_retry_base_s * 2**attempts, s.webhook_retry_max_s)
            attempts += 1
        return attempts

    def _backoff(self, attempts: int) -> float:
        s = self.settings
        base = min(s.webhook_retry_base_s * 2.0**attempts, s.webhook_retry_max_s)
        return base * random.uniform(0.5, 1.0)  # jitter: receivers coming back are not stampeded

    async def close(self) -> None:
        await self.http.aclose()
