"""A tool worker's placement on a real Redis and Docker engine: leaving on purpose hands its
interpreters to a peer on the same engine, which takes them over on the next call; a take-over
that fails tells the model why its state was lost; a backend that cannot hand over says the
worker stopped, as before."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import docker
import pytest
import redis

from services.tool_worker.placement import Placement, _spread
from services.tool_worker.toolbox import Toolbox
from taskyard.agentkit.schema import ActionReturn, ToolCall
from taskyard.plumbing.loop import LoopThread
from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.runtime.store import TaskStore
from taskyard.runtime.store.sandboxes import SandboxDirectory, ToolWorkerId

MakeWorker = Callable[..., Placement]


@pytest.fixture
def make_worker(
    redis_server: str, redis_client: redis.Redis, sandbox_image: str
) -> Iterator[MakeWorker]:
    """Tool workers (placement and toolbox) on one store, each with its own node name."""
    loop = LoopThread("test-placement")
    store = loop.run(_store(f"{redis_server}/0"))
    made: list[Placement] = []

    def make(node: str, backend: str = "docker") -> Placement:
        settings = ToolWorkerSettings(
            sandbox_image=sandbox_image, sandbox_backend=backend, sandbox_warm_pool=0
        )
        toolbox = Toolbox(settings, node)
        directory = SandboxDirectory(store, record_ttl_s=60)
        placement = Placement(directory, loop, ToolWorkerId(node), toolbox, 0.2, 5.0, 60.0)
        toolbox.sandboxes()  # made at start-up, as `Toolbox.start` does
        placement.start_beating()
        made.append(placement)
        return placement

    yield make
    for placement in made:
        placement.leave()  # its heartbeat stops
        placement.tools.close()
    loop.run(store.close())
    loop.close()


async def _store(url: str) -> TaskStore:
    return TaskStore.from_url(url, url.rsplit("/", 1)[0] + "/1")


def _run(worker: Placement, session: str, code: str) -> str:
    """A cell as the tool worker runs one: claim the session, then run the call."""
    assert worker.claim(session).verdict != "forward"
    call = ToolCall(id="c", name="IPythonInterpreter", parameters={"command": code})
    ret = worker.tools.run(call, session).content
    assert isinstance(ret, ActionReturn)
    return ret.format_result() + (ret.errmsg or "")


def _used(worker: Placement, session: str) -> None:
    # What storing the call's result does (put_tool_result.lua): the interpreter has state.
    record = f"session:{session}:sandbox"
    worker.loop.run(worker.directory.store.r.hset(record, "last_used", "1.0"))


def test_leaving_hands_the_interpreter_to_a_peer_that_takes_it_over(
    make_worker: MakeWorker,
) -> None:
    leaving, staying = make_worker("tools@a"), make_worker("tools@b")
    assert _run(leaving, "t:s", "x = 41\nprint(x)").strip() == "41"
    _used(leaving, "t:s")
    leaving.leave()
    leaving.tools.close()
    holder = leaving.loop.run(leaving.directory.holder("t:s"))
    assert (holder["state"], holder["node"]) == ("handed", "tools@b")
    assert _run(staying, "t:s", "print(x + 1)").strip() == "42"
    assert staying.tools.has_sandbox("t:s")


def test_a_failed_take_over_says_why_the_state_is_lost(make_worker: MakeWorker) -> None:
    leaving, staying = make_worker("tools@a"), make_worker("tools@b")
    _run(leaving, "t:s", "x = 41")
    _used(leaving, "t:s")
    leaving.leave()
    handle = leaving.loop.run(leaving.directory.holder("t:s"))["sandbox"]
    engine = docker.from_env()
    # Before anyone takes it ("<engine>/<container>", and "#<key>" on a fork server's).
    container = handle.rsplit("/", 1)[1].partition("#")[0]
    engine.api.remove_container(container, force=True)
    engine.close()
    after = _run(staying, "t:s", "print(globals().get('x'))")
    assert "Note: state lost (its tool worker tools@a was stopped" in after
    assert "taking its interpreter over failed: its sandbox's container is gone" in after
    assert after.strip().endswith("None")


def test_a_backend_that_cannot_hand_over_says_the_worker_stopped(
    make_worker: MakeWorker,
) -> None:
    leaving, staying = make_worker("tools@a", "local"), make_worker("tools@b", "local")
    _run(leaving, "t:s", "x = 41")
    _used(leaving, "t:s")
    leaving.leave()
    after = _run(staying, "t:s", "print(globals().get('x'))")
    assert "Note: state lost (its tool worker tools@a was stopped (scaled in" in after


def test_the_sessions_of_one_container_go_to_one_peer_the_others_in_turn() -> None:
    peers = [ToolWorkerId("tools@b"), ToolWorkerId("tools@c")]
    handles = {"t:1": "docker:E/h1#k1", "t:2": "docker:E/h1#k2", "t:3": "docker:E/k3",
               "t:4": "docker:E/h1#k4", "t:5": "docker:E/h2#k5"}  # fmt: skip
    handed = _spread(handles, peers)
    assert {handed[key].to for key in ("t:1", "t:2", "t:4")} == {peers[0]}
    assert [handed["t:3"].to, handed["t:5"].to] == [peers[1], peers[0]]
    assert {one.handle for one in handed.values()} == set(handles.values())
    assert {one.to for one in _spread(handles, []).values()} == {None}
