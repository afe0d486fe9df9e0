"""Webhooks: a task may ask to be told when it reaches some states (``"webhook": {"url": ...,
"events": ["succeeded", "failed"]}``).

Deliveries follow Standard Webhooks: a JSON body; ``webhook-id`` (the state change's event id
on the task's stream, stable across retries, so receivers drop duplicates),
``webhook-timestamp`` and ``webhook-signature`` (``v1,`` + base64 HMAC-SHA256 of
``id.timestamp.body`` under the tenant's ``whsec_`` secret, made on first use and read at
``GET /v1/webhooks/secret``: one tenant cannot forge another's deliveries). A subscription may
ask for A2A's body instead (``"format": "a2a"``: a `StreamResponse` with the status update,
and the `Authorization` and `X-A2A-Notification-Token` headers it gave), still signed; the
gateway's A2A push configs are such subscriptions, set on a running task (`attach`). They run as
Celery jobs on the `webhooks` queue, pushed by the store's scripts in the same write as the
state change (a slow receiver holds no agent step); each delivers, in order, every subscribed
change not delivered yet, and a failure is retried with exponential backoff and jitter for a
day: at least once. Addresses that are loopback, link-local or private are refused unless
``TASKYARD_WEBHOOK_ALLOW_PRIVATE`` (the same request guard as the web browser's).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import random
import secrets
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from ipaddress import ip_address
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson
from celery import Celery

from taskyard.agentkit.actions.web import (
    AddressPolicy,
    BlockedAddress,
    GuardedNetwork,
    GuardedTransport,
    Resolver,
    SystemResolver,
)
from taskyard.agentkit.spec import WebhookSpec
from taskyard.errors import TaskyardError
from taskyard.plumbing import keys
from taskyard.plumbing.settings import WebhookSettings
from taskyard.runtime.a2a_terms import A2A_STATES, event_time
from taskyard.runtime.events import EventKind
from taskyard.runtime.jobs import WebhookJob, enqueue, envelope
from taskyard.runtime.store import TaskStore, redis_replies
from taskyard.runtime.task import TaskRecord, TaskStatus

__all__ = [
    "Deliverer",
    "Outcome",
    "WebhookSpec",
    "attach",
    "deliveries",
    "detach",
    "refusal",
    "sign",
    "subscription",
    "tenant_secret",
    "verify",
]


async def refusal(
    url: str, policy: AddressPolicy, resolver: Resolver | None = None, timeout_s: float = 2.0
) -> str | None:
    """Why a webhook URL may not be used: its host is, or resolves to, an address the policy
    refuses (checked when the task is submitted, and again at each delivery as the name then
    resolves). A name that does not resolve now is not refused: it may by delivery time."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        addresses = [ip_address(host)]
    except ValueError:
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
            lookup = (resolver or SystemResolver()).resolve(host, port)
            addresses = await asyncio.wait_for(lookup, timeout_s)
        except (OSError, ValueError, TimeoutError):
            return None
    for address in addresses:
        if why := policy.refusal(address):
            return f"{host} is {why}; set TASKYARD_WEBHOOK_ALLOW_PRIVATE to allow it"
    return None


def subscription(record: TaskRecord, celery: Celery) -> dict[str, str]:
    """The task fields the store's scripts read to push a delivery job at each subscribed
    state change (`notify` in prelude.lua): the states, and the job's queue and message."""
    if record.webhook is None:
        return {}
    job = envelope(celery, WebhookJob(task_id=record.id))
    events = ",".join(["", *record.webhook.events, ""])
    return {"webhook_events": events, "webhook_queue": job.queue, "webhook_message": job.message}


async def attach(store: TaskStore, celery: Celery, record: TaskRecord, spec: WebhookSpec) -> bool:
    """Subscribe `spec` to a live task, in place of its webhook: it is told of the changes
    from now on. False (nothing written) if the task has ended or is gone.

    The cursor is the task's latest event, read before the task is seen live: a change made
    after that read is after the cursor, so it is told even if the task ends meanwhile. A
    delivery job goes out after the write, for a change made while it was written (the
    scripts push none for that one)."""
    latest = redis_replies.stream_entries(
        await store.r.xrevrange(keys.task_events(record.id), count=1)
    )
    live = await store.get(record.id)
    if live is None or live.terminal:
        return False
    subscribed = live.model_copy(update={"webhook": spec})
    async with store.r.pipeline(transaction=True) as pipe:
        pipe.set(keys.task_webhook_cursor(record.id), latest[0][0] if latest else "0-0")
        pipe.hset(keys.task(record.id), "webhook", spec.model_dump_json(),
                  items=_flat(subscription(subscribed, celery)))  # fmt: skip
        await pipe.execute()
    enqueue(celery, WebhookJob(task_id=record.id))
    return True


async def detach(store: TaskStore, task_id: str) -> None:
    """Unsubscribe the task's webhook: nothing more is delivered to it."""
    await store.r.hdel(keys.task(task_id), *_SUBSCRIPTION_FIELDS)


_SUBSCRIPTION_FIELDS = ("webhook", "webhook_events", "webhook_queue", "webhook_message")


def _flat(fields: dict[str, str]) -> list[str]:
    return [part for pair in fields.items() for part in pair]


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """Standard Webhooks' signature header value for a delivery."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = hmac.new(key, f"{message_id}.{timestamp}.".encode() + body, hashlib.sha256)
    return "v1," + base64.b64encode(signed.digest()).decode()


class InvalidSignature(TaskyardError, ValueError):
    """A delivery whose signature or timestamp does not check out."""


def verify(secret: str, headers: Mapping[str, str], body: bytes, tolerance_s: float = 300) -> None:
    """Check a delivery as a receiver should (headers by lower-case name): its signature,
    and a timestamp within `tolerance_s` of now (an old delivery replayed is refused)."""
    try:
        message_id, stamp = headers["webhook-id"], int(headers["webhook-timestamp"])
        offered = headers["webhook-signature"].split()
    except (KeyError, ValueError) as exc:
        raise InvalidSignature(f"missing or malformed webhook header: {exc}") from exc
    if abs(time.time() - stamp) > tolerance_s:
        raise InvalidSignature("webhook-timestamp is too far from now")
    expected = sign(secret, message_id, stamp, body)
    if not any(hmac.compare_digest(expected, candidate) for candidate in offered):
        raise InvalidSignature("no webhook-signature matches")


async def tenant_secret(store: TaskStore, tenant: str) -> str:
    """The tenant's signing secret, made (random, 32 bytes) the first time it is asked for."""
    key = keys.webhook_secret(tenant)
    made = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    await store.r.set(key, made, nx=True)
    return redis_replies.text(await store.r.get(key)) or made


async def deliveries(store: TaskStore, task_id: str) -> list[dict[str, Any]]:
    """The task's webhook deliveries so far, oldest event first."""
    found = await store.r.hgetall(keys.task_webhook_deliveries(task_id))
    entries = [orjson.loads(v) for v in found.values()]
    return sorted(entries, key=lambda e: tuple(map(int, e["event_id"].split("-"))))


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
            await self._due(task_id, time.time() + hold_s)
            outcome = await self._pending(task_id)
            if outcome.retry_in_s is None:
                await self.store.r.zrem(keys.WEBHOOKS_DUE, task_id)
            else:
                await self._due(task_id, time.time() + outcome.retry_in_s)
            return outcome
        finally:
            await self.store.r.delete(keys.task_webhook_lock(task_id))

    async def due(self, now: float, limit: int = 500) -> list[str]:
        """Tasks whose webhook events should be looked at again by `now`; each is marked
        for another look a grace period later (the job it gets moves the mark on)."""
        found = redis_replies.members(
            await self.store.r.zrangebyscore(keys.WEBHOOKS_DUE, "-inf", now, start=0, num=limit)
        )
        for task_id in found:
            await self._due(task_id, now + 120)
        return found

    async def _due(self, task_id: str, at: float) -> None:
        await self.store.r.zadd(keys.WEBHOOKS_DUE, {task_id: at})

    async def _pending(self, task_id: str) -> Outcome:
        record = await self.store.get(task_id)
        if record is None or record.webhook is None:
            return Outcome()
        cursor = (
            redis_replies.text(await self.store.r.get(keys.task_webhook_cursor(task_id))) or "-"
        )
        for event in await self.store.events(task_id, after=cursor):
            wanted = (
                event.kind == EventKind.STATUS and event.data["status"] in record.webhook.events
            )
            if wanted and (wait := await self._deliver_one(record, event.id, event.data)):
                return Outcome(retry_in_s=wait)
            await self.store.r.set(keys.task_webhook_cursor(task_id), event.id)
        return Outcome()

    async def _deliver_one(
        self, record: TaskRecord, event_id: str, data: dict[str, Any]
    ) -> float | None:
        """Try one event unless its backoff is still running; the seconds to wait before
        the next try, or None when done with it (delivered, or given up for good)."""
        assert record.webhook is not None
        before = await self._entry(record.id, event_id)
        attempts = before["attempts"] if before else 0
        if before and (wait := float(before["next_at"]) - time.time()) > 0:
            return wait
        body = orjson.dumps(_BODIES[record.webhook.format](record, event_id, data))
        now = int(time.time())
        signature = sign(await tenant_secret(self.store, record.tenant), event_id, now, body)
        headers = {"content-type": "application/json", "webhook-id": event_id,
                   "webhook-timestamp": str(now), "webhook-signature": signature,
                   **_asked_headers(record.webhook)}  # fmt: skip
        entry = {"event_id": event_id, "type": f"task.{data['status']}",
                 "attempts": attempts + 1, "at": time.time(), "next_at": 0.0}  # fmt: skip
        try:
            response = await self.http.post(record.webhook.url, content=body, headers=headers)
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

    async def _entry(self, task_id: str, event_id: str) -> dict[str, Any] | None:
        found = await self.store.r.hget(keys.task_webhook_deliveries(task_id), event_id)
        return orjson.loads(found) if found else None

    async def _record(
        self, task_id: str, entry: dict[str, Any], state: str, code: int | None, error: str
    ) -> None:
        entry = {**entry, "state": state, "status_code": code, "error": error or None}
        key = keys.task_webhook_deliveries(task_id)
        await self.store.r.hset(key, entry["event_id"], orjson.dumps(entry))

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


def _standard_body(record: TaskRecord, event_id: str, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": f"task.{data['status']}",
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "data": {"task_id": record.id, "session_id": record.session_id, **data},
    }


def _a2a_body(record: TaskRecord, event_id: str, data: dict[str, Any]) -> dict[str, Any]:
    """A2A's push notification: a `StreamResponse` holding the status update, in the JSON of
    the protocol's protobuf messages; a reason the task gives rides as the status message."""
    at = event_time(event_id).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    status: dict[str, Any] = {"state": A2A_STATES[TaskStatus(data["status"])], "timestamp": at}
    if reason := data.get("error") or data.get("reason"):
        status["message"] = {
            "messageId": event_id, "contextId": record.session_id, "taskId": record.id,
            "role": "ROLE_AGENT", "parts": [{"text": str(reason)}],
        }  # fmt: skip
    update = {"taskId": record.id, "contextId": record.session_id, "status": status}
    return {"statusUpdate": update}


_BODIES = {"standard": _standard_body, "a2a": _a2a_body}


def _asked_headers(spec: WebhookSpec) -> dict[str, str]:
    """The headers the subscriber asked for (A2A's `authentication` and `token`)."""
    asked = {"authorization": spec.authorization, "x-a2a-notification-token": spec.token}
    return {name: value for name, value in asked.items() if value is not None}
