"""The event hub on a real Redis: one XREAD for every follower, catching up, batches, resuming,
keep-alives; and a stream that ends when its client goes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
import redis
import redis.asyncio as aioredis

from services.gateway.app import create_app
from services.gateway.event_hub import Batch, EventHub, reader_client
from taskyard.plumbing import keys
from taskyard.plumbing.settings import GatewaySettings

TASK = "task_" + "1" * 32


@pytest.fixture
async def hub(redis_server: str, redis_client: redis.Redis) -> AsyncIterator[EventHub]:
    store = aioredis.Redis.from_url(f"{redis_server}/0", decode_responses=True)
    hub = EventHub(
        reader_client(GatewaySettings(redis_url=f"{redis_server}/0"), "test"),
        store,
        keep_alive_s=0.2,
    )
    yield hub
    await hub.close()
    await store.aclose()


async def _add(hub: EventHub, *events: tuple[str, dict[str, Any]]) -> list[str]:
    # One transaction, as the store's scripts write a commit's events: a reader blocked on
    # the stream sees them together (a plain pipeline may wake it between two of them).
    async with hub.client.pipeline(transaction=True) as pipe:
        for kind, data in events:
            pipe.xadd(keys.task_events(TASK), {"kind": kind, "data": orjson.dumps(data).decode()})
        return await pipe.execute()


def _ids(batch: Batch) -> list[str]:
    return [entry_id for entry_id, _ in batch.entries]


async def _next(follow: AsyncIterator[Batch]) -> Batch:
    return await asyncio.wait_for(anext(follow), 5)


async def test_it_catches_up_then_follows_what_arrives_together_as_one_batch(
    hub: EventHub,
) -> None:
    earlier = await _add(hub, ("status", {"status": "queued"}), ("message", {"content": "hi"}))
    follow = hub.follow(TASK)
    assert _ids(await _next(follow)) == earlier
    together = await _add(hub, ("token", {"delta": "a"}), ("status", {"status": "running"}))
    assert _ids(await _next(follow)) == together
    final = await _add(hub, ("status", {"status": "succeeded", "result": "a"}))
    last = await _next(follow)
    assert (_ids(last), last.final) == (final, True)
    assert last.entries[0][1]["data"] == '{"status":"succeeded","result":"a"}'  # as stored
    with pytest.raises(StopAsyncIteration):
        await _next(follow)
    assert hub.followed == 0


async def test_it_resumes_after_an_entry_and_a_final_event_ends_the_batch(hub: EventHub) -> None:
    first, second = await _add(hub, ("status", {"status": "queued"}), ("token", {"delta": "a"}))
    final, _ = await _add(hub, ("status", {"status": "failed"}), ("child", {"status": "x"}))
    batch = await _next(hub.follow(TASK, after=first))
    assert (_ids(batch), batch.final) == ([second, final], True)  # nothing past the final one


async def test_an_ended_task_gives_what_is_left_without_reading_live(hub: EventHub) -> None:
    ended = ("status", {"status": "failed"})
    first, final = await _add(hub, ("status", {"status": "queued"}), ended)
    assert [_ids(b) async for b in hub.follow(TASK, after=first, ended=True)] == [[final]]
    assert [b async for b in hub.follow(TASK, after=final, ended=True)] == []
    assert hub.followed == 0 and hub._task is None  # no reader started


async def test_a_second_follower_catches_up_without_duplicates(hub: EventHub) -> None:
    first = await _add(hub, ("status", {"status": "queued"}))
    one = hub.follow(TASK)
    assert _ids(await _next(one)) == first
    second = await _add(hub, ("status", {"status": "running"}))
    assert _ids(await _next(one)) == second
    other = hub.follow(TASK)
    assert _ids(await _next(other)) == first + second  # read from the start, by XRANGE
    third = await _add(hub, ("token", {"delta": "a"}))
    assert _ids(await _next(one)) == _ids(await _next(other)) == third
    assert hub.followed == 1


async def test_a_stream_followed_again_from_further_back_is_read_from_there(
    hub: EventHub, redis_client: redis.Redis
) -> None:
    """A stream whose follower leaves and which is followed again from an earlier entry while
    the XREAD that read it is still out: that XREAD's entries are not taken as the new
    follower's (they would skip what lies between)."""
    earlier = await _add(hub, ("status", {"status": "queued"}), ("token", {"delta": "a"}))
    one = hub.follow(TASK)
    assert _ids(await _next(one)) == earlier
    await one.aclose()  # left: the XREAD out still names the stream, after `earlier`
    await asyncio.sleep(0.05)
    # Written without yielding to the loop: the XREAD's answer (this entry) waits until the
    # stream is followed again from the start.
    later = redis_client.xadd(keys.task_events(TASK), {"kind": "token", "data": "{}"})
    again = hub.follow(TASK)
    assert _ids(await _next(again)) == [*earlier, later]


async def test_silence_gives_an_empty_batch_and_following_goes_on(hub: EventHub) -> None:
    first = await _add(hub, ("status", {"status": "queued"}))
    follow = hub.follow(TASK)
    assert _ids(await _next(follow)) == first
    assert await _next(follow) == Batch([])  # after keep_alive_s: a keep-alive cue
    later = await _add(hub, ("status", {"status": "running"}))
    assert _ids(await _next(follow)) == later


async def test_a_stream_ends_when_its_client_goes(settings: GatewaySettings) -> None:
    """GET /v1/tasks/{id}/events straight to the ASGI app: the client leaves after the first
    chunk; the response ends and the hub forgets the stream."""
    app = create_app(settings)
    sent: list[dict[str, Any]] = []
    left = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await left.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body":
            left.set()

    async with app.router.lifespan_context(app):
        task_id = await _submit(app)
        path = f"/v1/tasks/{task_id}/events"
        await asyncio.wait_for(app(_scope("GET", path), receive, send), 5)
        assert app.state.hub.followed == 0
    start, chunk = sent[0], sent[1]
    assert start["status"] == 200
    assert dict(start["headers"])[b"content-type"] == b"text/event-stream; charset=utf-8"
    assert chunk["more_body"] and chunk["body"].startswith(b"id: ")
    assert chunk["body"].count(b"\nevent: ") == 2  # queued and the input: one batch
    assert len(sent) == 2


async def _submit(app: Any) -> str:
    body = b'{"input": "hi"}'
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(_scope("POST", "/v1/tasks", [(b"content-type", b"application/json")]), receive, send)
    assert sent[0]["status"] == 202
    return orjson.loads(sent[1]["body"])["id"]


def _scope(method: str, path: str, headers: list[tuple[bytes, bytes]] | None = None) -> dict:
    return {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1", "method": method, "scheme": "http", "path": path,
            "raw_path": path.encode(), "root_path": "", "query_string": b"",
            "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 5000),
            "headers": [(b"authorization", b"Bearer key-a"), *(headers or [])]}  # fmt: skip
