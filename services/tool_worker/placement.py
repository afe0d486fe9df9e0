"""Where sessions' interpreters live, from one tool worker's side
(`taskyard.runtime.store.sandboxes`).

The worker's own queue is named after its Celery node name; it beats while it runs, so jobs
of the sessions it holds are pushed to that queue. Before a call uses a session's
interpreter, the worker claims the session: it runs the call if the session is (now) its,
forwards the job to the live worker holding it otherwise, takes over an interpreter another
worker handed it, and where that worker is gone starts afresh with the reason the model will
read. Interpreters it ends (idle expiry) are marked lost with why. When it stops on purpose,
it hands its idle interpreters with state over, running, to the other workers whose sandboxes
run in the same place (round robin), or to whichever of them gets the session's next call;
the rest (busy, or a backend whose kernels end with their worker) are marked lost; its queue
goes back to the pool.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Coroutine, Mapping
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from services.tool_worker.toolbox import Toolbox
from taskyard.plumbing.keys import tool_queue
from taskyard.plumbing.loop import LoopThread
from taskyard.runtime.jobs import FILES_TOOL, Envelope
from taskyard.runtime.store.documents import ClaimCallDoc
from taskyard.runtime.store.sandboxes import Handover, SandboxDirectory, SessionClaim, ToolWorkerId
from taskyard.runtime.store.script_keys import ClaimCallKeys
from taskyard.runtime.store.tool_calls import CallClaimed
from taskyard.sandbox import SandboxError, SandboxProvider

__all__ = ["Placement"]

log = logging.getLogger("taskyard.tool_worker.placement")
_REDIS_DOWN = (RedisConnectionError, RedisTimeoutError)


class Placement:
    """One tool worker's part in routing sessions to their interpreters."""

    def __init__(
        self,
        directory: SandboxDirectory,
        loop: LoopThread,
        me: ToolWorkerId,
        tools: Toolbox,
        beat_s: float,
        dead_s: float,
        handoff_lease_s: float = 600.0,
    ) -> None:
        self.directory = directory
        self.loop = loop
        self.me = me
        self.tools = tools
        self.beat_s = beat_s
        self.dead_s = dead_s
        # How long a handed-over interpreter waits for a taker: an idle session's lifetime.
        self.handoff_lease_s = handoff_lease_s
        self._stop = threading.Event()

    def claim(self, session_key: str) -> SessionClaim:
        """Claim the session's interpreter for a call about to run here (see module doc)."""
        place = self.tools.sandboxes().place
        return self.settle(
            session_key, self.loop.run(self.directory.claim(self.me, session_key, place))
        )

    def ask(
        self,
        session_key: str | None,
        call: tuple[ClaimCallKeys, ClaimCallDoc],
        directory: SandboxDirectory,
    ) -> Coroutine[Any, Any, tuple[SessionClaim | None, CallClaimed | None]]:
        """A tool call's claims, to await on the loop of `directory`'s store (the calling
        thread's: `services.tool_worker.thread_stores`): the session's (None: a call using no
        interpreter; `settle` its answer), then the call's (`call_claim`'s; None when the
        session's live holder is to run it), one round trip for both."""
        place = self.tools.sandboxes().place if session_key is not None else None
        return directory.claim_run(self.me, session_key, place, call)

    def settle(self, session_key: str, claim: SessionClaim) -> SessionClaim:
        """Act on the directory's answer to `ask`: drop a stale copy of the interpreter, take
        over one handed here, say a lost one's reason."""
        if claim.verdict != "mine" and self.tools.has_sandbox(session_key):
            # This worker's copy is stale: another holds the session now, or held it since.
            self.tools.release(session_key)
        if claim.verdict == "adopt":
            self._take_over(session_key, claim)
        if claim.verdict == "lost":
            log.warning("session's interpreter state lost: %s", claim.detail)
            self.tools.sandboxes().forget(session_key, claim.detail)
        return claim

    def _take_over(self, session_key: str, claim: SessionClaim) -> None:
        try:
            self.tools.sandboxes().take_over(session_key, claim.handle)
        except SandboxError as exc:
            reason = f"{claim.detail}; taking its interpreter over failed: {exc}"
            log.warning("session's interpreter state lost: %s", reason)
            self.tools.sandboxes().forget(session_key, reason)
        else:
            log.info("took over a session's interpreter (%s)", claim.handle)

    def place_fork(self, source_key: str, new_key: str) -> None:
        """A fork of the session `source_key`'s interpreter runs here now, as `new_key`'s."""
        self.loop.run(self.directory.place_fork(self.me, source_key, new_key))

    def forward(self, job: Envelope) -> None:
        """Send the job on to the worker that holds its session (the pool if none does)."""
        self.loop.run(self.directory.store.push([job]))

    def ended(self, reasons: Mapping[str, str | None]) -> None:
        """Interpreters ended here: why each lost its state (None: it had none)."""
        try:
            self.loop.run(self.directory.end(self.me, reasons))
        except _REDIS_DOWN:  # a lapsing record still routes to this live worker: no loss
            log.warning("could not record %d ended interpreters", len(reasons))

    def start_beating(self) -> None:
        self._beat()
        beating = threading.Thread(target=self._beat_until_stopped, name="heartbeat", daemon=True)
        beating.start()

    def leave(self) -> None:
        """The worker stops: it hands its interpreters over where it can, its other sessions'
        records say it stopped, its heartbeat goes, and the jobs waiting on its queue move to
        the pool (those it took and did not finish, kombu restores there itself)."""
        self._stop.set()
        why = f"its tool worker {self.me.node} was stopped (scaled in, or redeployed)"
        try:
            self._hand_over(why)
            self.loop.run(self.directory.end(self.me, dict.fromkeys(self.tools.sessions(), why)))
            self.loop.run(self.directory.stop_beating(self.me))
            fallback = tool_queue(FILES_TOOL)
            moved, _ = self.loop.run(self.directory.redrive(self.me.node, fallback))
            log.info("left: %d waiting jobs moved to the pool", moved)
        except _REDIS_DOWN:  # the sweep moves them once the heartbeat lapses
            log.warning("could not hand the worker's queue back; the sweep will")

    def _hand_over(self, why: str) -> None:
        sandboxes, place = self.tools.made_sandboxes, self._place()
        if sandboxes is None or place is None:
            return
        peers = self.loop.run(self.directory.peers(self.me, place))
        handles = sandboxes.hand_off(self.handoff_lease_s)
        handed = _spread(handles, peers)
        held = self.loop.run(self.directory.hand_over(self.me, handed, why))
        log.info("left: %d interpreters handed over (%d held here), to %d workers",
                 len(handed), held, len(peers))  # fmt: skip

    def _beat(self) -> None:
        self.loop.run(self.directory.beat(self.me, self.dead_s, self._place()))

    def _place(self) -> str | None:
        sandboxes: SandboxProvider | None = self.tools.made_sandboxes
        return sandboxes.place if sandboxes is not None else None

    def _beat_until_stopped(self) -> None:
        while not self._stop.wait(self.beat_s):
            try:
                self._beat()
            except _REDIS_DOWN:
                log.warning("heartbeat missed: Redis unreachable")


def _spread(handles: dict[str, str], peers: list[ToolWorkerId]) -> dict[str, Handover]:
    """Each interpreter to a peer in turn (None: no peer, any worker); the sessions of one
    container of several (handles alike before '#') to the same peer, which attaches to it."""
    takers = itertools.cycle(peers or [None])
    hosts: dict[str, ToolWorkerId | None] = {}
    handed = {}
    for key, handle in handles.items():
        host, shared, _ = handle.partition("#")
        if not shared:
            handed[key] = Handover(handle, next(takers))
            continue
        if host not in hosts:
            hosts[host] = next(takers)
        handed[key] = Handover(handle, hosts[host])
    return handed
