"""A task's webhook subscription: whether its URL may be used, the task fields the store's
scripts read to push a delivery job at each subscribed state change, and subscribing a live
task (the gateway's A2A push configs) or unsubscribing it."""

from __future__ import annotations

import asyncio
from ipaddress import ip_address
from urllib.parse import urlsplit

from celery import Celery

from taskyard.agentkit.actions.web import AddressPolicy, Resolver, SystemResolver
from taskyard.agentkit.spec import WebhookSpec
from taskyard.plumbing import keys
from taskyard.runtime.jobs import WebhookJob, enqueue, envelope
from taskyard.runtime.store import TaskStore, redis_replies
from taskyard.runtime.task import TaskRecord

__all__ = ["attach", "detach", "refusal", "subscription"]


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
