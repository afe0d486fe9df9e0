"""Which tool worker holds which session's interpreter, and which tool workers live.

A session's interpreter (its sandbox) lives on one tool worker. Its record
(`keys.session_sandbox`) names that worker (Celery node name and incarnation) and the worker's
own queue; the worker keeps a heartbeat key (`keys.tool_worker_alive`) with its incarnation
while it runs. The store's scripts push a job bound to a session to that queue while both say
so (`owner_queue` in prelude.lua), else to the tool's pool queue; the worker that takes a
session's call from the pool claims the session (`claim_session.lua`), or forwards the job to
the live holder, or, when the holder is gone, starts afresh and says why the state was lost.
The sweep moves the jobs left on a gone worker's queue back to the pool (`redrive`).

A worker stopping on purpose hands its running interpreters over (`hand_over`): to a live
worker whose sandboxes run in the same place (its Docker engine: `beat` keeps each worker's
place beside its heartbeat), or to whichever worker there gets the session's next call; that
worker's claim says `adopt`, with the interpreter's handle.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from taskyard.plumbing import keys
from taskyard.runtime.store import redis_replies
from taskyard.runtime.store.documents import (
    ClaimCallDoc,
    ClaimRunDoc,
    ClaimSessionDoc,
    EndSessionsDoc,
    HandOverDoc,
    HeirDoc,
    RedriveQueueDoc,
)
from taskyard.runtime.store.script_keys import (
    ClaimCallKeys,
    ClaimRunKeys,
    RecordsKeys,
    SandboxKeys,
    WorkerQueueKeys,
)
from taskyard.runtime.store.script_replies import CLAIM_RUN, REDRIVE, SESSION_CLAIM, decode
from taskyard.runtime.store.tasks import Tasks
from taskyard.runtime.store.tool_calls import CallClaimed

__all__ = ["Handover", "SandboxDirectory", "SessionClaim", "ToolWorkerId"]


@dataclass(frozen=True, slots=True)
class ToolWorkerId:
    """A tool worker: its Celery node name (distinct per worker: ``-n tools@%h``) and this
    run of it (a restart under the same name is another incarnation)."""

    node: str
    incarnation: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    @property
    def queue(self) -> str:
        return keys.tool_worker_queue(self.node)


@dataclass(frozen=True, slots=True)
class SessionClaim:
    """What a worker about to use a session's interpreter learnt: it held it already (`mine`),
    holds it now (`new`, or `lost` with why the state the session had is gone, or `adopt`: it
    is to take over the running interpreter `handle`), or must send the job to `forward`'s
    queue, the live worker's that holds it."""

    verdict: Literal["new", "mine", "forward", "lost", "adopt"]
    detail: str = ""  # forward: the queue; lost: the reason; adopt: the reason if it fails
    handle: str = ""  # adopt: the interpreter handed over (`SandboxProvider.hand_off`)


@dataclass(frozen=True, slots=True)
class Handover:
    """One interpreter a leaving worker hands over: its handle, and the worker chosen to take
    it over (None: whichever gets the session's next call where the interpreter runs)."""

    handle: str
    to: ToolWorkerId | None = None


class SandboxDirectory:
    """The records of sessions' interpreters and the tool workers' heartbeats, on the store's
    Redis. `record_ttl_s`: how long a record outlives its interpreter's last use (long enough
    that a session coming back is told its interpreter expired)."""

    def __init__(self, store: Tasks, record_ttl_s: float = 86400.0) -> None:
        self.store = store
        self.record_ttl_s = max(1, int(record_ttl_s))

    async def claim(
        self, worker: ToolWorkerId, session_key: str, place: str | None = None
    ) -> SessionClaim:
        """See `claim_session.lua`; `place`: where the worker's sandboxes run (None: it can
        take no interpreter over)."""
        record, doc = keys.session_sandbox(session_key), self._claim_doc(worker, place, True)
        raw = await self.store.script("sandboxes/claim_session", SandboxKeys(record), doc)
        reply = decode(SESSION_CLAIM, raw)
        return SessionClaim(reply.verdict, reply.detail, reply.handle)

    async def claim_run(
        self,
        worker: ToolWorkerId,
        session_key: str | None,
        place: str | None,
        call: tuple[ClaimCallKeys, ClaimCallDoc],
    ) -> tuple[SessionClaim | None, CallClaimed | None]:
        """A call's two claims in one round trip (`claim_run.lua`): the session's (`claim`;
        None without a `session_key`, for a call that uses no interpreter), then the call's
        (`call`: `call_claim`'s; None when the session's live holder is to run it)."""
        call_keys, call_doc = call
        doc = ClaimRunDoc(call=call_doc)
        records: tuple[str, ...] = ()
        if session_key is not None:
            # The call's result keeps the record alive, so its claim need not.
            doc["session"] = self._claim_doc(worker, place, False)
            records = (keys.session_sandbox(session_key),)
        keys_ = ClaimRunKeys(*call_keys, session=records)
        reply = decode(CLAIM_RUN, await self.store.script("tool_calls/claim_run", keys_, doc))
        session = None
        if reply.verdict:
            session = SessionClaim(reply.verdict, reply.detail, reply.handle)
        return session, reply.call or None

    def _claim_doc(
        self, worker: ToolWorkerId, place: str | None, keep_alive: bool
    ) -> ClaimSessionDoc:
        return ClaimSessionDoc(node=worker.node, incarnation=worker.incarnation,
                               queue=worker.queue, record_ttl_s=self.record_ttl_s,
                               place=place or "", keep_alive=keep_alive)  # fmt: skip

    async def place_fork(self, worker: ToolWorkerId, source_key: str, new_key: str) -> None:
        """The worker holds `new_key`'s interpreter now, a fork of `source_key`'s (with its
        state, so a loss is said), and the cells that made the source's are the new one's too
        (a replay after a loss runs them)."""
        record, cells = keys.session_sandbox(new_key), keys.session_cells(new_key)
        async with self.store.r.pipeline(transaction=True) as pipe:
            pipe.delete(record, cells)
            pipe.hset(record, mapping={
                "node": worker.node, "incarnation": worker.incarnation, "queue": worker.queue,
                "state": "live", "reason": "", "sandbox": "", "last_used": f"{time.time():.3f}",
            })  # fmt: skip
            pipe.expire(record, self.record_ttl_s)
            pipe.copy(keys.session_cells(source_key), cells)
            await pipe.execute()

    async def hand_over(
        self, worker: ToolWorkerId, handed: Mapping[str, Handover], reason: str
    ) -> int:
        """The worker, leaving, hands these sessions' running interpreters over; `reason`
        (why) is what a session's next call says if nobody can take its interpreter over. How
        many records it held."""
        if not handed:
            return 0
        records = tuple(keys.session_sandbox(key) for key in handed)
        doc = HandOverDoc(node=worker.node, incarnation=worker.incarnation, reason=reason,
                          to=[_heir(one) for one in handed.values()])  # fmt: skip
        return int(await self.store.script("sandboxes/hand_over", RecordsKeys(records), doc))

    async def peers(self, worker: ToolWorkerId, place: str) -> list[ToolWorkerId]:
        """The other live workers whose sandboxes run in `place` (as their heartbeats say)."""
        nodes = sorted(redis_replies.set_members(await self.store.r.smembers(keys.TOOL_WORKERS)))
        nodes = [node for node in nodes if node != worker.node]
        async with self.store.r.pipeline(transaction=False) as pipe:
            for node in nodes:
                pipe.get(keys.tool_worker_alive(node))
                pipe.get(keys.tool_worker_place(node))
            found = await pipe.execute()
        runs = [redis_replies.text(run) for run in found[::2]]
        places = [redis_replies.text(at) for at in found[1::2]]
        return [
            ToolWorkerId(node, run)
            for node, run, at in zip(nodes, runs, places, strict=True)
            if run is not None and at == place
        ]

    async def end(self, worker: ToolWorkerId, ended: Mapping[str, str | None]) -> int:
        """The worker's interpreters of these sessions ended: each record it holds keeps why
        (a reason) or goes (None: nothing was lost). How many it held."""
        if not ended:
            return 0
        records = tuple(keys.session_sandbox(key) for key in ended)
        doc = EndSessionsDoc(node=worker.node, incarnation=worker.incarnation,
                             reasons=[reason or "" for reason in ended.values()])  # fmt: skip
        return int(await self.store.script("sandboxes/end_sessions", RecordsKeys(records), doc))

    async def holder(self, session_key: str) -> dict[str, str]:
        """The session's record as stored (empty when no worker holds its interpreter)."""
        return redis_replies.fields(await self.store.r.hgetall(keys.session_sandbox(session_key)))

    async def beat(self, worker: ToolWorkerId, ttl_s: float, place: str | None = None) -> None:
        """The worker lives for `ttl_s` more, its sandboxes in `place` (if it can hand them
        over); it is listed for the sweep."""
        ttl_ms = int(ttl_s * 1000)
        async with self.store.r.pipeline(transaction=True) as pipe:
            pipe.set(keys.tool_worker_alive(worker.node), worker.incarnation, px=ttl_ms)
            if place is not None:
                pipe.set(keys.tool_worker_place(worker.node), place, px=ttl_ms)
            pipe.sadd(keys.TOOL_WORKERS, worker.node)
            await pipe.execute()

    async def stop_beating(self, worker: ToolWorkerId) -> None:
        """The worker leaves: its heartbeat goes now instead of lapsing (if it is still its)."""
        alive = keys.tool_worker_alive(worker.node)
        if await self.store.r.get(alive) == worker.incarnation:
            await self.store.r.delete(alive)

    async def gone(self) -> list[str]:
        """Node names of listed tool workers whose heartbeat lapsed."""
        nodes = sorted(redis_replies.set_members(await self.store.r.smembers(keys.TOOL_WORKERS)))
        async with self.store.r.pipeline(transaction=False) as pipe:
            for node in nodes:
                pipe.exists(keys.tool_worker_alive(node))
            alive = await pipe.execute()
        return [node for node, live in zip(nodes, alive, strict=True) if not live]

    async def redrive(self, node: str, fallback: str, limit: int = 1000) -> tuple[int, int]:
        """Move the jobs on the worker's own queue back to their pool queues (`fallback` for
        one without); (moved, left). A worker whose queue is empty leaves the list."""
        store = self.store
        queue = keys.tool_worker_queue(node)
        doc = RedriveQueueDoc(store_db=store.db, broker_db=store.broker_db, limit=limit,
                              fallback=fallback)  # fmt: skip
        raw = await store.script("sandboxes/redrive_queue", WorkerQueueKeys(queue), doc)
        redriven = decode(REDRIVE, raw)
        if not redriven.left and not await store.r.exists(keys.tool_worker_alive(node)):
            await store.r.srem(keys.TOOL_WORKERS, node)
        return redriven.moved, redriven.left


def _heir(handover: Handover) -> HeirDoc:
    to = handover.to
    return HeirDoc(handle=handover.handle, node=to.node if to else "",
                   incarnation=to.incarnation if to else "",
                   queue=to.queue if to else "")  # fmt: skip
