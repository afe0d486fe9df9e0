"""`GET /v1/tasks` (newest first, cursor pages, filters) and `/v1/sessions/{id}` (its
messages, tasks and holder; deleting it) against the real Redis, no workers."""

from __future__ import annotations

import asyncio

import pytest
import redis
from fastapi.testclient import TestClient

from taskyard.agentkit.schema import AgentMessage
from taskyard.plumbing import keys
from taskyard.plumbing.settings import GatewaySettings
from taskyard.runtime.store import TaskStore

AUTH = {"Authorization": "Bearer key-a"}
OTHER = {"Authorization": "Bearer key-b"}


def _submit(client: TestClient, text: str, session: str, headers: dict = AUTH) -> str:
    resp = client.post("/v1/tasks", json={"input": text, "session_id": session}, headers=headers)
    assert resp.status_code == 202, resp.text
    return resp.json()["id"]


def _pages(client: TestClient, query: str, limit: int) -> list[list[str]]:
    pages, cursor = [], None
    while True:
        url = f"/v1/tasks?limit={limit}{query}" + (f"&cursor={cursor}" if cursor else "")
        body = client.get(url, headers=AUTH).json()
        pages.append([t["id"] for t in body["tasks"]])
        cursor = body["next_cursor"]
        if cursor is None:
            return pages


def test_tasks_come_newest_first_a_page_at_a_time(client: TestClient) -> None:
    ids = [_submit(client, f"t{i}", f"s{i % 3}") for i in range(7)]
    _submit(client, "not yours", "s0", OTHER)
    pages = _pages(client, "", 3)
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [t for page in pages for t in page] == ids[::-1]


def test_tasks_filter_by_session_and_status(client: TestClient) -> None:
    ids = [_submit(client, f"t{i}", "one" if i % 2 else "two") for i in range(6)]
    assert [t for p in _pages(client, "&session_id=one", 2) for t in p] == ids[1::2][::-1]
    # In each session the first task holds it (queued, its step sent); the rest wait, queued too.
    client.post(f"/v1/tasks/{ids[0]}/cancel", headers=AUTH)
    cancelled = [t for p in _pages(client, "&status=cancelled", 2) for t in p]
    assert cancelled == [ids[0]]
    queued = [t for p in _pages(client, "&status=queued", 2) for t in p]
    assert queued == [t for t in ids[::-1] if t != ids[0]]


@pytest.mark.parametrize("query", ["status=nope", "limit=0", "limit=1000", "cursor=x",
                                   "session_id=bad id"])  # fmt: skip
def test_bad_list_queries_are_422(client: TestClient, query: str) -> None:
    assert client.get(f"/v1/tasks?{query}", headers=AUTH).status_code == 422


def _remember(settings: GatewaySettings, session: str, texts: list[str]) -> None:
    client = redis.Redis.from_url(settings.redis_url)
    memory = keys.session_memory("tenant-a", session)
    client.rpush(memory, *(AgentMessage(content=t).model_dump_json() for t in texts))


def test_a_session_shows_its_messages_tasks_and_holder(
    client: TestClient, settings: GatewaySettings
) -> None:
    first = _submit(client, "a", "shown")
    second = _submit(client, "b", "shown")
    _remember(settings, "shown", [f"m{i}" for i in range(5)])
    body = client.get("/v1/sessions/shown?offset=1&limit=2", headers=AUTH).json()
    assert [m["content"] for m in body["messages"]] == ["m1", "m2"]
    assert body["total_messages"] == 5
    assert body["tasks"] == [second, first]
    assert (body["running"], body["waiting"]) == (first, [second])
    assert body["interpreter"] is None  # no tool worker has run a cell for it
    assert client.get("/v1/sessions/shown", headers=OTHER).status_code == 404
    assert client.get("/v1/sessions/never", headers=AUTH).status_code == 404


def test_deleting_a_busy_session_needs_force_and_cancels_its_tasks(
    client: TestClient, settings: GatewaySettings
) -> None:
    first = _submit(client, "a", "doomed")
    second = _submit(client, "b", "doomed")
    _remember(settings, "doomed", ["keep me?"])
    resp = client.delete("/v1/sessions/doomed", headers=AUTH)
    assert resp.status_code == 409 and first in resp.json()["detail"]
    assert client.delete("/v1/sessions/doomed", headers=OTHER).status_code == 404
    assert client.delete("/v1/sessions/doomed?force=true", headers=AUTH).status_code == 204
    for task_id in (first, second):
        assert client.get(f"/v1/tasks/{task_id}", headers=AUTH).json()["status"] == "cancelled"
    # The session is gone (as the fuzzer expects of a DELETE); its tasks stay, as tasks.
    assert client.get("/v1/sessions/doomed", headers=AUTH).status_code == 404
    assert client.delete("/v1/sessions/doomed", headers=AUTH).status_code == 404
    assert client.get("/v1/tasks?session_id=doomed", headers=AUTH).json()["tasks"] == []
    listed = [t["id"] for t in client.get("/v1/tasks", headers=AUTH).json()["tasks"]]
    assert listed == [second, first]

    async def memory() -> list[AgentMessage]:
        store = TaskStore.from_url(settings.redis_url, settings.broker_url)
        try:
            return await store.memory("tenant-a", "doomed")
        finally:
            await store.close()

    assert asyncio.run(memory()) == []
    epoch = redis.Redis.from_url(settings.redis_url).get(keys.session_epoch("tenant-a", "doomed"))
    assert epoch == b"1"  # warm copies in agent workers read it afresh


def _session_pages(client: TestClient, limit: int, headers: dict = AUTH) -> list[list[str]]:
    pages, cursor = [], None
    while True:
        url = f"/v1/sessions?limit={limit}" + (f"&cursor={cursor}" if cursor else "")
        resp = client.get(url, headers=headers)
        assert resp.status_code == 200, resp.text
        pages.append([s["id"] for s in resp.json()["sessions"]])
        cursor = resp.json()["next_cursor"]
        if cursor is None:
            return pages


def test_sessions_come_most_recently_used_first_a_page_at_a_time(client: TestClient) -> None:
    for i in range(5):
        _submit(client, f"t{i}", f"s{i}")
    _submit(client, "again", "s1")  # s1 is now the most recently used
    pages = _session_pages(client, 2)
    assert [len(p) for p in pages] == [2, 2, 1]
    assert [s for p in pages for s in p] == ["s1", "s4", "s3", "s2", "s0"]


def test_sessions_are_their_tenants(client: TestClient) -> None:
    _submit(client, "a", "mine")
    _submit(client, "b", "theirs", OTHER)
    _submit(client, "c", "shared-name", OTHER)
    _submit(client, "d", "shared-name")
    assert _session_pages(client, 10) == [["shared-name", "mine"]]
    assert _session_pages(client, 10, OTHER) == [["shared-name", "theirs"]]
    other = client.get("/v1/sessions", headers=OTHER).json()["sessions"][0]
    assert other["task_count"] == 1  # tenant-b's shared-name, not tenant-a's


def test_a_listed_session_says_where_it_stands(
    client: TestClient, settings: GatewaySettings
) -> None:
    first = _submit(client, "a", "busy")
    _submit(client, "b", "busy")
    _remember(settings, "busy", ["m0", "m1", "m2"])
    (listed,) = client.get("/v1/sessions", headers=AUTH).json()["sessions"]
    assert listed["id"] == "busy"
    assert (listed["task_count"], listed["running"], listed["waiting"]) == (2, first, 1)
    assert listed["total_messages"] == 3 and listed["interpreter"] is None
    task = client.get(f"/v1/tasks/{first}", headers=AUTH).json()
    assert listed["last_task_at"] >= task["created_at"]


def test_a_deleted_session_leaves_the_list_until_its_next_task(client: TestClient) -> None:
    _submit(client, "a", "kept")
    first = _submit(client, "b", "gone")
    client.post(f"/v1/tasks/{first}/cancel", headers=AUTH)
    assert client.delete("/v1/sessions/gone", headers=AUTH).status_code == 204
    assert _session_pages(client, 10) == [["kept"]]
    _submit(client, "c", "gone")
    assert _session_pages(client, 10) == [["gone", "kept"]]


def test_sessions_used_at_the_same_time_are_each_listed_once(
    client: TestClient, settings: GatewaySettings
) -> None:
    # Five sessions whose latest tasks share one timestamp: a page boundary falls among them.
    _submit(client, "a", "s-a")
    index = keys.tenant_sessions("tenant-a")
    redis.Redis.from_url(settings.redis_url).zadd(
        index, {f"tie{i}": 1_700_000_000.5 for i in range(5)}
    )
    pages = _session_pages(client, 2)
    assert [s for p in pages for s in p] == ["s-a", "tie4", "tie3", "tie2", "tie1", "tie0"]


@pytest.mark.parametrize("query", ["limit=0", "limit=201", "cursor=x", "cursor=1.5~bad id"])
def test_bad_session_list_queries_are_422(client: TestClient, query: str) -> None:
    assert client.get(f"/v1/sessions?{query}", headers=AUTH).status_code == 422


def test_sessions_need_a_key(client: TestClient) -> None:
    assert client.get("/v1/sessions").status_code == 401
