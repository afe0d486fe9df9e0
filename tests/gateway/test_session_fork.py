"""`POST /v1/sessions/{id}/fork` against the real Redis: the memory copied and independent
afterwards, the refusals (404, 409, 422), and the interpreter's part through a stand-in for the
tool worker holding it (it takes the fork job from that worker's own queue and answers)."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator

import pytest
import redis
from fastapi.testclient import TestClient

from services.gateway.app import create_app
from taskyard.agentkit.schema import AgentMessage
from taskyard.plumbing import keys
from taskyard.plumbing.settings import GatewaySettings
from taskyard.runtime.forks import ForkReply
from taskyard.runtime.jobs import SessionForkJob

AUTH = {"Authorization": "Bearer key-a"}
OTHER = {"Authorization": "Bearer key-b"}
TENANT = "tenant-a"


def _remember(settings: GatewaySettings, session: str, texts: list[str], path: str = "memory"):
    r = redis.Redis.from_url(settings.redis_url)
    memory = keys.session_memory(TENANT, session, path)
    r.rpush(memory, *(AgentMessage(content=t).model_dump_json() for t in texts))
    r.sadd(keys.session_paths(TENANT, session), memory)


def _contents(client: TestClient, session: str, memory: str = "memory") -> list[str]:
    resp = client.get(f"/v1/sessions/{session}?memory={memory}", headers=AUTH)
    assert resp.status_code == 200, resp.text
    return [m["content"] for m in resp.json()["messages"]]


def _fork(client: TestClient, source: str, new: str | None = None, headers: dict = AUTH):
    body = {"session_id": new} if new is not None else None
    return client.post(f"/v1/sessions/{source}/fork", json=body, headers=headers)


def test_a_fork_copies_the_memory_and_each_goes_its_own_way(
    client: TestClient, settings: GatewaySettings
) -> None:
    _remember(settings, "a", ["hello", "hi"])
    _remember(settings, "a", ["draft"], "writer.memory")
    redis.Redis.from_url(settings.redis_url).hset(
        keys.session_values(TENANT, "a"), "counter", json.dumps(3)
    )
    resp = _fork(client, "a", "b")
    assert resp.status_code == 201, resp.text
    assert resp.json() == {
        "session_id": "b", "forked_from": "a", "interpreter": "none", "skipped": {},
    }  # fmt: skip
    shown = client.get("/v1/sessions/b", headers=AUTH).json()
    assert shown["memories"] == {"memory": 2, "writer.memory": 1}
    assert shown["values"] == {"counter": 3}
    assert shown["forked_from"] == "a" and shown["tasks"] == []
    assert _contents(client, "b", "writer.memory") == ["draft"]
    # Separate keys: what either gains later, the other does not see.
    _remember(settings, "a", ["only a"])
    _remember(settings, "b", ["only b"])
    assert _contents(client, "a") == ["hello", "hi", "only a"]
    assert _contents(client, "b") == ["hello", "hi", "only b"]
    listed = client.get("/v1/sessions", headers=AUTH).json()["sessions"]
    assert [(s["id"], s["forked_from"]) for s in listed] == [("b", "a")]  # a has no task


def test_without_an_id_the_fork_gets_a_new_one(
    client: TestClient, settings: GatewaySettings
) -> None:
    _remember(settings, "a", ["hello"])
    resp = client.post("/v1/sessions/a/fork", headers=AUTH)
    assert resp.status_code == 201, resp.text
    new = resp.json()["session_id"]
    assert len(new) == 32 and new != "a"
    assert _contents(client, new) == ["hello"]


def test_an_empty_fork_of_a_fork_still_exists(client: TestClient) -> None:
    task = client.post("/v1/tasks", json={"input": "x", "session_id": "a"}, headers=AUTH).json()
    client.post(f"/v1/tasks/{task['id']}/cancel", headers=AUTH)
    assert _fork(client, "a", "b").status_code == 201  # a: a task, no messages
    assert _fork(client, "b", "c").status_code == 201  # b: only its origin
    assert client.get("/v1/sessions/c", headers=AUTH).json()["forked_from"] == "b"
    assert client.delete("/v1/sessions/c", headers=AUTH).status_code == 204
    assert client.get("/v1/sessions/c", headers=AUTH).status_code == 404


def test_another_tenants_session_or_none_is_404(
    client: TestClient, settings: GatewaySettings
) -> None:
    _remember(settings, "a", ["hello"])
    assert _fork(client, "a", "b", OTHER).status_code == 404
    assert _fork(client, "never", "b").status_code == 404
    assert client.get("/v1/sessions/b", headers=OTHER).status_code == 404


def test_a_session_with_a_task_running_or_waiting_is_409(client: TestClient) -> None:
    first = client.post("/v1/tasks", json={"input": "x", "session_id": "a"}, headers=AUTH)
    second = client.post("/v1/tasks", json={"input": "y", "session_id": "a"}, headers=AUTH)
    resp = _fork(client, "a", "b")
    assert resp.status_code == 409
    assert resp.json()["detail"] == (
        f"session a has task {first.json()['id']} queued; fork it when it ends"
    )
    client.post(f"/v1/tasks/{first.json()['id']}/cancel", headers=AUTH)  # second takes it
    assert second.json()["id"] in _fork(client, "a", "b").json()["detail"]
    client.post(f"/v1/tasks/{second.json()['id']}/cancel", headers=AUTH)
    assert _fork(client, "a", "b").status_code == 201
    assert client.get("/v1/sessions/b", headers=AUTH).json()["tasks"] == []


def test_a_new_id_in_use_is_409(client: TestClient, settings: GatewaySettings) -> None:
    _remember(settings, "a", ["hello"])
    _remember(settings, "taken", ["mine"])
    for new in ("taken", "a"):
        resp = _fork(client, "a", new)
        assert resp.status_code == 409 and "already exists" in resp.json()["detail"]
    assert _fork(client, "a", "b").status_code == 201
    assert _fork(client, "a", "b").status_code == 409
    assert _contents(client, "taken") == ["mine"]


@pytest.mark.parametrize("body", [{"session_id": "bad id"}, {"session_id": ""},
                                  {"session_id": "x" * 129}, {"other": 1}])  # fmt: skip
def test_a_malformed_new_id_is_422(
    client: TestClient, settings: GatewaySettings, body: dict
) -> None:
    _remember(settings, "a", ["hello"])
    assert client.post("/v1/sessions/a/fork", json=body, headers=AUTH).status_code == 422


# -- the interpreter, through a stand-in for the tool worker holding it ---------------------


def _held_by(settings: GatewaySettings, session: str, node: str = "w1") -> str:
    """Say a live worker holds the session's interpreter; its own queue."""
    r = redis.Redis.from_url(settings.redis_url)
    queue = keys.tool_worker_queue(node)
    record = {"node": node, "incarnation": "i1", "state": "live", "queue": queue}
    r.hset(keys.session_sandbox(keys.session_key(TENANT, session)), mapping=record)
    r.set(keys.tool_worker_alive(node), "i1")
    return queue


class StandIn:
    """Takes one fork job from a worker's queue and answers it as told (None: not at all)."""

    def __init__(self, settings: GatewaySettings, queue: str, answer: ForkReply | None):
        self.broker = redis.Redis.from_url(settings.broker_url)
        self.store = redis.Redis.from_url(settings.redis_url)
        self.queue, self.answer = queue, answer
        self.jobs: list[SessionForkJob] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        popped = self.broker.brpop([self.queue], timeout=10)
        assert popped is not None
        body = json.loads(base64.b64decode(json.loads(popped[1])["body"]))
        job = SessionForkJob.model_validate(body[0][0])
        self.jobs.append(job)
        if self.answer is not None:
            self.store.rpush(keys.session_fork_reply(job.request_id), self.answer.model_dump_json())


@pytest.fixture
def serve(settings: GatewaySettings) -> Iterator:
    started: list[StandIn] = []

    def start(queue: str, answer: ForkReply | None) -> StandIn:
        stand_in = StandIn(settings, queue, answer)
        stand_in.thread.start()
        started.append(stand_in)
        return stand_in

    yield start
    for stand_in in started:
        stand_in.thread.join(timeout=10)


def test_the_worker_holding_the_interpreter_copies_it(
    client: TestClient, settings: GatewaySettings, serve
) -> None:
    _remember(settings, "a", ["hello"])
    skipped = {"sock": "socket cannot be copied"}
    worker = serve(_held_by(settings, "a"), ForkReply(outcome="copied", skipped=skipped))
    resp = _fork(client, "a", "b")
    assert resp.status_code == 201, resp.text
    assert (resp.json()["interpreter"], resp.json()["skipped"]) == ("copied", skipped)
    (job,) = worker.jobs
    assert (job.tenant, job.session_id, job.new_session_id) == (TENANT, "a", "b")


def test_a_holder_without_a_running_interpreter_forks_the_memory_alone(
    client: TestClient, settings: GatewaySettings, serve
) -> None:
    _remember(settings, "a", ["hello"])
    serve(_held_by(settings, "a"), ForkReply(outcome="none"))
    assert _fork(client, "a", "b").json()["interpreter"] == "none"


def test_a_gone_holder_gets_no_job(client: TestClient, settings: GatewaySettings) -> None:
    _remember(settings, "a", ["hello"])
    queue = _held_by(settings, "a")
    redis.Redis.from_url(settings.redis_url).delete(keys.tool_worker_alive("w1"))
    assert _fork(client, "a", "b").json()["interpreter"] == "none"
    assert redis.Redis.from_url(settings.broker_url).llen(queue) == 0


@pytest.mark.parametrize(("answer", "code", "said"), [
    (ForkReply(outcome="busy", detail="a cell runs"), 409, "a cell runs in session a's"),
    (ForkReply(outcome="unavailable", detail="gVisor: one container per session"), 503,
     "cannot be forked: gVisor: one container per session"),
])  # fmt: skip
def test_a_fork_the_worker_refuses_is_undone(
    client: TestClient, settings: GatewaySettings, serve, answer: ForkReply, code: int, said: str
) -> None:
    _remember(settings, "a", ["hello"])
    serve(_held_by(settings, "a"), answer)
    resp = _fork(client, "a", "b")
    assert resp.status_code == code and said in resp.json()["detail"]
    assert client.get("/v1/sessions/b", headers=AUTH).status_code == 404
    assert _contents(client, "a") == ["hello"]
    redis.Redis.from_url(settings.redis_url).delete(keys.tool_worker_alive("w1"))
    assert _fork(client, "a", "b").status_code == 201  # the id is free again


def test_a_silent_worker_is_504_and_the_fork_undone(settings: GatewaySettings, serve) -> None:
    fast = settings.model_copy(update={"gateway_fork_timeout_s": 0.2})
    _remember(settings, "a", ["hello"])
    serve(_held_by(settings, "a"), None)
    with TestClient(create_app(fast)) as client:
        resp = _fork(client, "a", "b")
        assert resp.status_code == 504 and "did not answer within 0.2 s" in resp.json()["detail"]
        assert client.get("/v1/sessions/b", headers=AUTH).status_code == 404
