"""Sessions to sandboxes: the part of a `SandboxProvider` every kernel backend shares.

Live kernels are bounded per tenant (the session key's part before ":") and per worker. A
session that needs a kernel past a bound takes the place of the least recently used idle
one; when every one is busy it gets `SandboxLimitReached`. Whoever loses a kernel this way,
or by idle reaping, is told on its next call that state was lost, and why.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from taskyard.plumbing.settings import SandboxSettings
from taskyard.sandbox.base import InterpreterCopy
from taskyard.sandbox.channel import KernelChannel, StartKernel
from taskyard.sandbox.demand import PoolBounds
from taskyard.sandbox.errors import SandboxLimitReached, SandboxUnavailable
from taskyard.sandbox.interpreter_copy import copy_interpreter
from taskyard.sandbox.pool import PoolState, WarmPool
from taskyard.sandbox.session import INTERRUPT_GRACE_S, KernelSandbox

__all__ = ["KernelSandboxProvider", "SandboxLimits"]

CHECK_TIMEOUT_S = 30.0
_FORGOTTEN_KEPT = 10_000  # reaped or evicted session keys remembered, to tell them why


@dataclass(frozen=True)
class SandboxLimits:
    """How many kernels may run at once, per tenant and per provider (worker)."""

    per_tenant: int = 16
    per_worker: int = 32

    @classmethod
    def from_settings(cls, settings: SandboxSettings) -> SandboxLimits:
        return cls(settings.sandbox_max_per_tenant, settings.sandbox_max_per_worker)


def tenant_of(session_key: str) -> str:
    return session_key.split(":", 1)[0]


class KernelSandboxProvider:
    """One `KernelSandbox` per session key, a warm pool, quotas, idle reaping.

    Backends subclass it and hand in how to start one kernel. Thread-safe: the session map
    has its own lock, and each session runs one cell at a time under its own lock, so
    different sessions run concurrently. (A session's lock may be held while it takes the
    map's lock to start a kernel; the other way round, only non-blocking attempts.)
    """

    def __init__(
        self,
        start: StartKernel,
        *,
        pool: PoolBounds,
        idle_s: float,
        limits: SandboxLimits | None = None,
        interrupt_grace_s: float = INTERRUPT_GRACE_S,
    ) -> None:
        self.starts = 0
        # Not `_start_kernel`: that is the backends' method, handed in as `start`.
        self._start = start = self._counted(start)
        self._pool = WarmPool(start, pool)
        self._idle_s = idle_s
        self._limits = limits or SandboxLimits()
        self._grace = interrupt_grace_s
        self._sessions: dict[str, KernelSandbox] = {}
        self._forgotten: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def _counted(self, start: StartKernel) -> StartKernel:
        def start_counted(session_key: str | None) -> KernelChannel:
            self.starts += 1
            return start(session_key)

        return start_counted

    @property
    def warm(self) -> int:
        """Started kernels waiting in the warm pool."""
        return len(self._pool)

    def get(self, session_key: str) -> KernelSandbox:
        """The session's sandbox; its kernel starts (or leaves the pool) on the first run."""
        with self._lock:
            sandbox = self._sessions.get(session_key)
            if sandbox is None:
                sandbox = KernelSandbox(
                    lambda: self._start_for(session_key),
                    self._grace,
                    lost_reason=self._forgotten.pop(session_key, None),
                )
                self._sessions[session_key] = sandbox
            return sandbox

    def find(self, session_key: str) -> KernelSandbox | None:
        """The session's sandbox if its kernel runs (or is starting), else None: never starts
        one. What a read of the session's files asks first."""
        with self._lock:
            sandbox = self._sessions.get(session_key)
        return sandbox if sandbox is not None and sandbox.has_kernel else None

    def interrupt(self, session_key: str) -> bool:
        """Stop the session's running cell, from any thread; see `KernelSandbox.cancel`."""
        with self._lock:
            sandbox = self._sessions.get(session_key)
        return sandbox is not None and sandbox.cancel()

    def fork(self, source_key: str, new_key: str) -> InterpreterCopy | None:
        """See `SandboxProvider.fork`. The new session's kernel starts the usual way (its own
        container, or a session of the tenant's fork server) and gets the source's state by
        transfer (`interpreter_copy`): a fork of the executor itself would live inside its
        source's pid namespace, so it could neither be walled off from it nor outlive it
        (docs/security.md). A copy that fails stops the new session's kernel."""
        source = self.find(source_key)
        if source is None:
            return None
        with source.exclusive():
            target = self.get(new_key)
            try:
                return copy_interpreter(source, target)
            except BaseException:
                self.release(new_key)
                raise

    def release(self, session_key: str) -> None:
        """Stop the session's kernel; a later `get` starts a fresh one."""
        with self._lock:
            sandbox = self._sessions.pop(session_key, None)
        if sandbox is not None:
            sandbox.close()

    def check(self) -> None:
        """Start one kernel outside any session, run a cell in it and stop it.

        Raises `SandboxUnavailable` with the reason when that fails: for a worker's start-up.
        """
        sandbox = KernelSandbox(lambda: self._start(None), self._grace)
        try:
            result = sandbox.run("6 * 7", CHECK_TIMEOUT_S)
        finally:
            sandbox.close()
        if result.result != "42":
            raise SandboxUnavailable(f"a test cell failed: {result.error or result}")

    def reap_idle(self) -> list[str]:
        """Stop sessions idle longer than the idle limit (skipping busy ones); their keys."""
        with self._lock:
            retired = {
                key: sandbox
                for key, sandbox in self._sessions.items()
                if sandbox.retire_if_idle(self._idle_s)
            }
            for key, sandbox in retired.items():
                del self._sessions[key]
                if sandbox.has_state:
                    self._remember(key, f"session expired: idle for over {self._idle_s:g} s")
        for sandbox in retired.values():
            sandbox.close()
        return list(retired)

    def pool_state(self) -> PoolState:
        """The warm pool's kernels, ready and starting, and how many it aims for."""
        return self._pool.state()

    def sessions(self) -> list[str]:
        """Keys of the sessions that hold a sandbox."""
        with self._lock:
            return list(self._sessions)

    def close_all(self) -> None:
        """Stop the pool and every session's kernel."""
        self._pool.close()
        with self._lock:
            sandboxes, self._sessions = list(self._sessions.values()), {}
        for sandbox in sandboxes:
            sandbox.close()

    def _start_for(self, session_key: str) -> KernelChannel:
        """A kernel for the session, once there is room for it (called under its lock)."""
        evicted: list[KernelChannel] = []
        try:
            with self._lock:
                self._make_room(session_key, evicted)
        finally:
            for channel in evicted:
                channel.close()
        return self._pool.take(session_key)

    def _make_room(self, session_key: str, evicted: list[KernelChannel]) -> None:
        live = [k for k, s in self._sessions.items() if k != session_key and s.has_kernel]
        tenant = tenant_of(session_key)
        same_tenant = [k for k in live if tenant_of(k) == tenant]
        scopes = [
            (f"tenant {tenant!r}", self._limits.per_tenant, "MAX_PER_TENANT", same_tenant),
            ("this worker", self._limits.per_worker, "MAX_PER_WORKER", live),
        ]
        for scope, limit, setting, members in scopes:
            excess = len(members) + 1 - limit
            reason = f"session evicted: {scope} reached its limit of {limit} live sandboxes"
            for key in sorted(members, key=lambda k: -self._sessions[k].idle_for()):  # LRU first
                if excess <= 0:
                    break
                channel = self._sessions[key].evict_if_idle(reason)
                if channel is not None:
                    evicted.append(channel)
                    live.remove(key)
                    excess -= 1
            if excess > 0:
                raise SandboxLimitReached(
                    f"{scope} already has {limit} live sandboxes, all busy "
                    f"(TASKYARD_SANDBOX_{setting}); "
                    "try again when one of them finishes"
                )

    @property
    def place(self) -> str | None:
        """Where another worker could take this provider's kernels over from (`hand_off`), or
        None: here kernels end with their worker."""
        return None

    def hand_off(self, lease_s: float) -> dict[str, str]:
        """Let each idle session's kernel that holds state outlive this provider for up to
        `lease_s`, for another worker to `take_over`: their handles by session key. Busy and
        stateless sessions, and the warm pool, stay (`close_all` ends them). Backends whose
        kernels cannot outlive their worker hand off none."""
        return {}

    def take_over(self, session_key: str, handle: str) -> None:
        """Make a kernel another worker handed off (`handle`) the session's, state and all.
        Raises `SandboxUnavailable` saying why it cannot (here: never)."""
        raise SandboxUnavailable("this sandbox backend cannot take a kernel over from another")

    def _detach_idle(self) -> dict[str, KernelChannel]:
        """Every idle session's kernel with state, taken out of this provider, running."""
        with self._lock:
            detached = {
                key: channel
                for key, sandbox in self._sessions.items()
                if (channel := sandbox.detach_if_idle()) is not None
            }
            for key in detached:
                del self._sessions[key]
        return detached

    def _attach(self, session_key: str, channel: KernelChannel) -> None:
        """Give the session `channel`, a running kernel holding its state; room is made for
        it as for a new one (`SandboxLimitReached` if none can be)."""
        sandbox = KernelSandbox(lambda: self._start_for(session_key), self._grace)
        sandbox.adopt(channel)
        evicted: list[KernelChannel] = []
        try:
            with self._lock:
                self._make_room(session_key, evicted)
                replaced = self._sessions.pop(session_key, None)
                self._sessions[session_key] = sandbox
                self._forgotten.pop(session_key, None)
        finally:
            for stale in evicted:
                stale.close()
        if replaced is not None:
            replaced.close()

    def forget(self, session_key: str, reason: str) -> None:
        with self._lock:
            self._remember(session_key, reason)

    def _remember(self, session_key: str, reason: str) -> None:
        self._forgotten[session_key] = reason
        while len(self._forgotten) > _FORGOTTEN_KEPT:
            self._forgotten.popitem(last=False)

    def lost_reason(self, session_key: str) -> str | None:
        with self._lock:
            return self._forgotten.get(session_key)
