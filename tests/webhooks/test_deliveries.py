"""Webhook deliveries on a real Redis to a real receiver on loopback: the store's scripts push
a delivery job in the same write as each subscribed state change; deliveries are signed
(Standard Webhooks), keep their id across retries, go out in order, back off between tries,
give up after the retry window, and refuse private addresses unless allowed. A subscription
in A2A's format gets A2A's body and the headers it asked for, and one can be attached to a
running task (the gateway's A2A push configs)."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import AsyncIterator, Callable

import pytest
import redis
from a2a.types import StreamResponse, TaskState
from a2a.utils.proto_utils import parse_lenient
from aiohttp import web

from taskyard.agentkit.spec import WebhookSpec
from taskyard.client.webhooks import verify
from taskyard.plumbing import keys
from taskyard.plumbing.celery_app import make_celery
from taskyard.plumbing.settings import AgentWorkerSettings
from taskyard.runtime.store import StepCommit, TaskStore
from taskyard.runtime.task import TaskRecord, TaskStatus
from taskyard.runtime.webhooks import (
    Deliverer,
    attach,
    deliveries,
    detach,
    subscription,
    tenant_secret,
)


class Receiver:
    """An HTTP endpoint answering with the next scripted status code (then 200 for ever)."""

    def __init__(self) -> None:
        self.codes: list[int] = []
        self.received: list[tuple[dict[str, str], bytes]] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.received.append(({k.lower(): v for k, v in request.headers.items()},
                              await request.read()))  # fmt: skip
        code = self.codes.pop(0) if self.codes else 200
        return web.Response(status=code, text="nope" if code >= 300 else "ok")

    def bodies(self) -> list[dict]:
        return [json.loads(body) for _, body in self.received]


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[Receiver, str]]:
    found = Receiver()
    app = web.Application()
    app.router.add_post("/hook", found.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield found, f"http://127.0.0.1:{port}/hook"
    await runner.cleanup()


@pytest.fixture
def settings(redis_server: str, redis_client: redis.Redis) -> AgentWorkerSettings:
    redis.Redis.from_url(f"{redis_server}/1").flushdb()
    return AgentWorkerSettings(redis_url=f"{redis_server}/0", broker_url=f"{redis_server}/1",
                    webhook_allow_private=True, webhook_retry_base_s=0.05,
                    webhook_retry_max_s=0.2, webhook_retry_for_s=0.5)  # fmt: skip


@pytest.fixture
async def deliverer(store: TaskStore, settings: AgentWorkerSettings) -> AsyncIterator[Deliverer]:
    deliverer = Deliverer(store, settings)
    yield deliverer
    await deliverer.close()


Create = Callable[..., "asyncio.Future[TaskRecord]"]


@pytest.fixture
def create(
    store: TaskStore, settings: AgentWorkerSettings, receiver: tuple[Receiver, str]
) -> Create:
    async def create(events: list[str] | None = None, url: str | None = None) -> TaskRecord:
        hook = WebhookSpec(url=url or receiver[1], **({"events": events} if events else {}))
        record = TaskRecord(tenant="acme", session_id=f"s{time.monotonic_ns()}", input="hi",
                            webhook=hook)  # fmt: skip
        extra = subscription(record, make_celery(settings))
        assert (await store.create(record, extra=extra)).outcome == "created"
        return record

    return create  # type: ignore[return-value]


async def _delivery_jobs(settings: AgentWorkerSettings) -> list[dict]:
    broker = redis.Redis.from_url(settings.broker_url)
    messages = [json.loads(m) for m in broker.lrange(keys.WEBHOOK_QUEUE, 0, -1)]
    return [json.loads(base64.b64decode(m["body"])) for m in messages]


async def _succeed(store: TaskStore, record: TaskRecord) -> None:
    running = await store.begin_step(record.id, 0, record.tenant, record.session_id,
                                     {"memory": 0}, "0")  # fmt: skip
    assert running is not None
    done = StepCommit(running.record, TaskStatus.SUCCEEDED, fields={"result": "42"})
    assert (await store.commit_step(done))[0]


async def _deliver_until_done(deliverer: Deliverer, task_id: str) -> int:
    """Run delivery jobs as the worker would (waiting out each backoff); the jobs it took."""
    for jobs in range(1, 50):
        outcome = await deliverer.deliver(task_id)
        if outcome.retry_in_s is None:
            return jobs
        await asyncio.sleep(outcome.retry_in_s)
    raise AssertionError("deliveries never finished")


async def test_each_subscribed_state_change_pushes_a_delivery_job_with_the_write(
    store: TaskStore, settings: AgentWorkerSettings, create: Create
) -> None:
    record = await create(events=["running", "succeeded"])
    assert await _delivery_jobs(settings) == []  # `queued` is not subscribed
    await _succeed(store, record)
    jobs = await _delivery_jobs(settings)
    assert len(jobs) == 2 and all(j[0][0]["task_id"] == record.id for j in jobs)
    assert await store.r.zscore(keys.WEBHOOKS_DUE, record.id) is not None  # a lost job's net


async def test_a_failing_receiver_gets_the_same_signed_delivery_until_it_accepts(
    store: TaskStore, deliverer: Deliverer, create: Create, receiver: tuple[Receiver, str]
) -> None:
    found, _ = receiver
    record = await create()
    await _succeed(store, record)
    found.codes = [500, 503]
    assert await _deliver_until_done(deliverer, record.id) == 3
    assert len(found.received) == 3
    assert len({headers["webhook-id"] for headers, _ in found.received}) == 1
    secret = await tenant_secret(store, "acme")
    for headers, body in found.received:
        verify(secret, headers, body)
    body = found.bodies()[-1]
    assert body["type"] == "task.succeeded" and body["data"]["task_id"] == record.id
    [told] = await deliveries(store, record.id)
    assert told["state"] == "delivered" and told["attempts"] == 3 and told["status_code"] == 200
    assert await store.r.zscore(keys.WEBHOOKS_DUE, record.id) is None
    assert (await deliverer.deliver(record.id)).retry_in_s is None
    assert len(found.received) == 3  # a duplicate job delivers nothing twice


async def test_a_job_during_a_backoff_does_not_try_early(
    store: TaskStore, deliverer: Deliverer, create: Create, receiver: tuple[Receiver, str]
) -> None:
    found, _ = receiver
    record = await create()
    await _succeed(store, record)
    found.codes = [500]
    wait = (await deliverer.deliver(record.id)).retry_in_s
    assert wait is not None and wait > 0
    again = (await deliverer.deliver(record.id)).retry_in_s
    assert again is not None and again <= wait and len(found.received) == 1
    [told] = await deliveries(store, record.id)
    assert told["state"] == "retrying" and told["attempts"] == 1 and told["error"] == "nope"


async def test_events_go_out_in_order_and_a_dead_receiver_is_given_up_on(
    store: TaskStore, deliverer: Deliverer, create: Create, receiver: tuple[Receiver, str]
) -> None:
    found, _ = receiver
    record = await create(events=["running", "succeeded"])
    await _succeed(store, record)
    found.codes = [500] * 50  # never accepts within the (half a second) retry window
    await _deliver_until_done(deliverer, record.id)
    types = [body["type"] for body in found.bodies()]
    first_succeeded = types.index("task.succeeded")
    assert set(types[:first_succeeded]) == {"task.running"}  # nothing overtakes
    told = await deliveries(store, record.id)
    assert [t["state"] for t in told] == ["failed", "failed"]
    assert told[0]["attempts"] == deliverer.max_attempts


async def test_a_private_receiver_is_refused_unless_allowed(
    store: TaskStore, settings: AgentWorkerSettings, create: Create, receiver: tuple[Receiver, str]
) -> None:
    found, url = receiver
    strict = Deliverer(store, settings.model_copy(update={"webhook_allow_private": False}))
    record = await create(url=url.replace("127.0.0.1", "localhost"))  # a name: checked as sent
    await _succeed(store, record)
    try:
        assert (await strict.deliver(record.id)).retry_in_s is None
    finally:
        await strict.close()
    [told] = await deliveries(store, record.id)
    assert told["state"] == "refused" and "loopback" in told["error"]
    assert found.received == []


async def test_each_tenant_has_its_own_stable_secret(store: TaskStore) -> None:
    first = await tenant_secret(store, "acme")
    assert first.startswith("whsec_") and len(base64.b64decode(first[6:])) == 32
    assert await tenant_secret(store, "acme") == first
    assert await tenant_secret(store, "other") != first


A2A_HOOK = {"format": "a2a", "events": ["failed", "succeeded"], "token": "tok-1",
            "authorization": "Bearer receiver-secret"}  # fmt: skip


async def test_an_a2a_subscription_gets_a2a_s_body_and_the_headers_it_asked_for(
    store: TaskStore,
    deliverer: Deliverer,
    settings: AgentWorkerSettings,
    receiver: tuple[Receiver, str],
) -> None:
    found, url = receiver
    record = TaskRecord(tenant="acme", session_id="ctx-1", input="hi",
                        webhook=WebhookSpec.model_validate({"url": url, **A2A_HOOK}))  # fmt: skip
    assert (await store.create(record, extra=subscription(record, make_celery(settings)))).outcome
    await store.end(record, TaskStatus.FAILED, error="the model is gone")
    assert await _deliver_until_done(deliverer, record.id) == 1
    [(headers, body)] = found.received
    verify(await tenant_secret(store, "acme"), headers, body)  # still signed
    assert headers["authorization"] == "Bearer receiver-secret"
    assert headers["x-a2a-notification-token"] == "tok-1"
    update = parse_lenient(json.loads(body), StreamResponse()).status_update
    assert (update.task_id, update.context_id) == (record.id, "ctx-1")
    assert update.status.state == TaskState.TASK_STATE_FAILED
    assert update.status.message.parts[0].text == "the model is gone"
    assert abs(update.status.timestamp.seconds - time.time()) < 60


async def test_a_subscription_attached_to_a_running_task_hears_of_what_follows(
    store: TaskStore,
    deliverer: Deliverer,
    settings: AgentWorkerSettings,
    receiver: tuple[Receiver, str],
) -> None:
    found, url = receiver
    celery = make_celery(settings)
    record = TaskRecord(tenant="acme", session_id="ctx-2", input="hi")
    assert (await store.create(record)).outcome == "created"
    spec = WebhookSpec.model_validate({"url": url, **A2A_HOOK, "events": ["queued", "succeeded"]})
    assert await attach(store, celery, record, spec)
    assert [j[0][0]["task_id"] for j in await _delivery_jobs(settings)] == [record.id]
    assert await _deliver_until_done(deliverer, record.id) == 1
    assert found.received == []  # `queued` came before it: not told
    await _succeed(store, record)
    await _deliver_until_done(deliverer, record.id)
    [body] = found.bodies()
    assert body["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    stored = await store.get(record.id)
    assert stored is not None and stored.webhook == spec
    await detach(store, record.id)
    stored = await store.get(record.id)
    assert stored is not None and stored.webhook is None
    assert await store.r.hget(keys.task(record.id), "webhook_events") is None


async def test_nothing_is_attached_to_a_task_that_has_ended(
    store: TaskStore, settings: AgentWorkerSettings, receiver: tuple[Receiver, str]
) -> None:
    _, url = receiver
    record = TaskRecord(tenant="acme", session_id="ctx-3", input="hi")
    assert (await store.create(record)).outcome == "created"
    await store.end(record, TaskStatus.CANCELLED, error="stopped")
    spec = WebhookSpec.model_validate({"url": url, **A2A_HOOK})
    assert not await attach(store, make_celery(settings), record, spec)
    stored = await store.get(record.id)
    assert stored is not None and stored.webhook is None
    assert await _delivery_jobs(settings) == []
