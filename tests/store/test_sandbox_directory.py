"""Which tool worker holds which session's interpreter, on a real Redis: claims, the routing
of jobs bound to a session, what a gone worker's sessions are told, the re-drive of its queue."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import orjson
import pytest
import redis.asyncio as aioredis

from taskyard.plumbing import keys
from taskyard.runtime.jobs import Envelope
from taskyard.runtime.store import TaskStore
from taskyard.runtime.store.sandboxes import Handover, SandboxDirectory, SessionClaim, ToolWorkerId

POOL = "tools.IPythonInterpreter"
A, B = ToolWorkerId("tools@a"), ToolWorkerId("tools@b")


@pytest.fixture
async def directory(redis_server: str) -> AsyncIterator[SandboxDirectory]:
    client = aioredis.Redis.from_url(f"{redis_server}/0", decode_responses=True)
    await client.flushall()
    store = TaskStore(client, broker_db=1)
    yield SandboxDirectory(store, record_ttl_s=60)
    await client.aclose()


@pytest.fixture
async def broker(redis_server: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(f"{redis_server}/1", decode_responses=True)
    yield client
    await client.aclose()


def _job(sticky: str = "t:s", routing_key: str = POOL) -> Envelope:
    message = {"body": "", "properties": {"delivery_info": {"routing_key": routing_key}}}
    return Envelope(POOL, orjson.dumps(message).decode(), sticky)


async def _used(directory: SandboxDirectory, session_key: str) -> None:
    # What storing a call's result does (put_tool_result.lua) once the interpreter ran it.
    await directory.store.r.hset(keys.session_sandbox(session_key), "last_used", "1.0")


async def test_the_first_claim_takes_the_session_and_its_jobs_follow(
    directory: SandboxDirectory, broker: aioredis.Redis
) -> None:
    await directory.beat(A, 10)
    assert (await directory.claim(A, "t:s")).verdict == "new"
    assert (await directory.claim(A, "t:s")).verdict == "mine"
    await directory.store.push([_job(), _job(sticky="")])
    assert await broker.llen(A.queue) == 1  # bound to the session: to its holder
    assert await broker.llen(POOL) == 1  # not bound: the pool


async def test_another_worker_forwards_to_the_live_holder(directory: SandboxDirectory) -> None:
    await directory.beat(A, 10)
    await directory.claim(A, "t:s")
    claim = await directory.claim(B, "t:s")
    assert (claim.verdict, claim.detail) == ("forward", A.queue)


async def test_a_holder_that_stopped_answering_loses_the_session_with_the_reason(
    directory: SandboxDirectory, broker: aioredis.Redis
) -> None:
    await directory.beat(A, 0.05)
    await directory.claim(A, "t:s")
    await _used(directory, "t:s")
    await asyncio.sleep(0.1)  # A's heartbeat lapsed
    await directory.store.push([_job()])
    assert await broker.llen(POOL) == 1  # its jobs go to the pool now
    claim = await directory.claim(B, "t:s")
    assert claim.verdict == "lost"
    assert "tools@a stopped answering" in claim.detail
    assert (await directory.claim(B, "t:s")).verdict == "mine"  # said once


async def test_a_holder_gone_before_any_call_finished_lost_nothing(
    directory: SandboxDirectory,
) -> None:
    await directory.beat(A, 0.05)
    await directory.claim(A, "t:s")
    await asyncio.sleep(0.1)
    assert (await directory.claim(B, "t:s")).verdict == "new"


async def test_a_restarted_worker_says_so(directory: SandboxDirectory) -> None:
    await directory.beat(A, 10)
    await directory.claim(A, "t:s")
    await _used(directory, "t:s")
    again = ToolWorkerId(A.node)  # the same node name, a new run
    await directory.beat(again, 10)
    claim = await directory.claim(again, "t:s")
    assert (claim.verdict, claim.detail) == ("lost", "its tool worker tools@a restarted")


async def test_an_ended_interpreter_says_why_wherever_the_next_call_runs(
    directory: SandboxDirectory,
) -> None:
    await directory.beat(A, 10)
    await directory.beat(B, 10)
    for key in ("t:expired", "t:stateless"):
        await directory.claim(A, key)
    ended = {"t:expired": "session expired: idle for over 600 s", "t:stateless": None}
    assert await directory.end(A, ended) == 2
    assert await directory.end(B, ended) == 0  # not B's to end
    claim = await directory.claim(B, "t:expired")
    assert (claim.verdict, claim.detail) == ("lost", "session expired: idle for over 600 s")
    assert (await directory.claim(B, "t:stateless")).verdict == "new"


async def test_a_gone_workers_queue_goes_back_to_the_pool(
    directory: SandboxDirectory, broker: aioredis.Redis
) -> None:
    await directory.beat(A, 0.05)
    await directory.claim(A, "t:s")
    await directory.store.push([_job(), _job(routing_key=A.queue)])
    assert await broker.llen(A.queue) == 2
    await asyncio.sleep(0.1)
    assert await directory.gone() == [A.node]
    assert await directory.redrive(A.node, POOL) == (2, 0)
    assert await broker.llen(POOL) == 2  # one by its routing key, one by the fallback
    assert await directory.gone() == []  # drained and gone: off the list


async def test_a_live_worker_is_not_gone(directory: SandboxDirectory) -> None:
    await directory.beat(A, 10)
    assert await directory.gone() == []
    await directory.stop_beating(A)
    assert await directory.gone() == [A.node]


# Hand-overs: a worker stopping on purpose passes its running interpreters on.
ENGINE, ELSEWHERE = "docker:E1", "docker:E2"
HANDLE = f"{ENGINE}/c0ffee"
C = ToolWorkerId("tools@c")


async def test_peers_are_the_other_live_workers_in_the_same_place(
    directory: SandboxDirectory,
) -> None:
    await directory.beat(A, 10, ENGINE)
    await directory.beat(B, 10, ENGINE)
    await directory.beat(C, 10, ELSEWHERE)
    assert await directory.peers(A, ENGINE) == [B]
    await directory.stop_beating(B)
    assert await directory.peers(A, ENGINE) == []


async def test_an_interpreter_handed_to_a_worker_routes_its_jobs_there_and_is_adopted(
    directory: SandboxDirectory, broker: aioredis.Redis
) -> None:
    for worker in (A, B):
        await directory.beat(worker, 10, ENGINE)
    await directory.claim(A, "t:s", ENGINE)
    await _used(directory, "t:s")
    assert await directory.hand_over(A, {"t:s": Handover(HANDLE, B)}, "A stopped") == 1
    await directory.stop_beating(A)
    await directory.store.push([_job()])
    assert await broker.llen(B.queue) == 1  # straight to the worker taking it over
    assert await directory.claim(C, "t:s", ENGINE) == SessionClaim("forward", B.queue)
    claim = await directory.claim(B, "t:s", ENGINE)
    assert claim == SessionClaim("adopt", "A stopped", HANDLE)
    assert (await directory.claim(B, "t:s", ENGINE)).verdict == "mine"
    record = await directory.holder("t:s")
    assert (record["node"], record["state"], record["last_used"]) == (B.node, "live", "1.0")


async def test_a_parked_interpreter_goes_to_whoever_runs_where_it_runs(
    directory: SandboxDirectory,
) -> None:
    await directory.beat(A, 10, ENGINE)
    for key in ("t:here", "t:there"):
        await directory.claim(A, key, ENGINE)
    handed = {key: Handover(HANDLE) for key in ("t:here", "t:there")}
    assert await directory.hand_over(A, handed, "A stopped") == 2
    await directory.stop_beating(A)
    assert await directory.claim(B, "t:here", ENGINE) == SessionClaim("adopt", "A stopped", HANDLE)
    assert await directory.claim(C, "t:there", ELSEWHERE) == SessionClaim(
        "lost", "A stopped, and no tool worker where its interpreter runs took it over"
    )
    assert await directory.claim(C, "t:there", None) == SessionClaim("mine")


async def test_an_interpreter_whose_taker_died_goes_to_another_worker_there(
    directory: SandboxDirectory,
) -> None:
    await directory.beat(A, 10, ENGINE)
    await directory.beat(B, 0.05, ENGINE)
    await directory.claim(A, "t:s", ENGINE)
    await directory.hand_over(A, {"t:s": Handover(HANDLE, B)}, "A stopped")
    await asyncio.sleep(0.1)  # B's heartbeat lapsed before it took the interpreter
    assert (await directory.claim(C, "t:s", ENGINE)).verdict == "adopt"


async def test_only_the_records_the_leaving_worker_holds_are_handed_over(
    directory: SandboxDirectory,
) -> None:
    await directory.beat(A, 10, ENGINE)
    await directory.beat(B, 10, ENGINE)
    await directory.claim(B, "t:s", ENGINE)
    assert await directory.hand_over(A, {"t:s": Handover(HANDLE, C)}, "A stopped") == 0
    assert await directory.claim(B, "t:s", ENGINE) == SessionClaim("mine")


D = ToolWorkerId("tools@d")
HOST = f"{ENGINE}/c0ffee"  # a container of several sessions: their handles are HOST#<key>


async def _hand_over_host(directory: SandboxDirectory, to: ToolWorkerId | None) -> int:
    """A's sessions t:one and t:two, both on HOST, handed over to `to` (None: parked)."""
    for key in ("t:one", "t:two"):
        await directory.claim(A, key, ENGINE)
    handed = {key: Handover(f"{HOST}#{key[2:]}", to) for key in ("t:one", "t:two")}
    return await directory.hand_over(A, handed, "A stopped")


async def test_a_parked_container_of_several_goes_whole_to_its_first_taker(
    directory: SandboxDirectory,
) -> None:
    await directory.beat(A, 10, ENGINE)
    for worker in (B, C):
        await directory.beat(worker, 10, ENGINE)
    assert await _hand_over_host(directory, None) == 2
    await directory.stop_beating(A)
    assert await directory.claim(B, "t:one", ENGINE) == SessionClaim(
        "adopt", "A stopped", f"{HOST}#one"
    )
    # C must not attach to the container B holds: the call goes to B, which adopts it.
    assert await directory.claim(C, "t:two", ENGINE) == SessionClaim("forward", B.queue)
    assert await directory.claim(B, "t:two", ENGINE) == SessionClaim(
        "adopt", "A stopped", f"{HOST}#two"
    )


async def test_a_container_of_several_handed_to_a_worker_routes_every_session_there(
    directory: SandboxDirectory,
) -> None:
    for worker in (A, B, C):
        await directory.beat(worker, 10, ENGINE)
    await _hand_over_host(directory, B)
    await directory.stop_beating(A)
    assert await directory.claim(C, "t:two", ENGINE) == SessionClaim("forward", B.queue)
    assert (await directory.claim(B, "t:one", ENGINE)).verdict == "adopt"


async def test_a_container_whose_taker_died_goes_whole_to_the_next(
    directory: SandboxDirectory,
) -> None:
    await directory.beat(A, 10, ENGINE)
    await directory.beat(B, 0.05, ENGINE)
    await directory.beat(C, 10, ENGINE)
    await _hand_over_host(directory, B)
    await asyncio.sleep(0.1)  # B's heartbeat lapsed before it took the container
    assert (await directory.claim(C, "t:one", ENGINE)).verdict == "adopt"
    await directory.beat(D, 10, ENGINE)
    assert await directory.claim(D, "t:two", ENGINE) == SessionClaim("forward", C.queue)
