"""Sessions to sandboxes: the part of a `SandboxProvider` every kernel backend shares."""

from __future__ import annotations

import threading

from shared.sandbox.channel import StartKernel
from shared.sandbox.pool import WarmPool
from shared.sandbox.session import INTERRUPT_GRACE_S, KernelSandbox

__all__ = ["KernelSandboxProvider"]


class KernelSandboxProvider:
    """One `KernelSandbox` per session key, a warm pool, idle reaping.

    Backends subclass it and hand in how to start one kernel. Thread-safe: the session map
    has its own lock, and each session runs one cell at a time under its own lock, so
    different sessions run concurrently.
    """

    def __init__(
        self,
        start: StartKernel,
        *,
        pool_size: int,
        idle_s: float,
        interrupt_grace_s: float = INTERRUPT_GRACE_S,
    ) -> None:
        self._pool = WarmPool(start, pool_size)
        self._idle_s = idle_s
        self._grace = interrupt_grace_s
        self._sessions: dict[str, KernelSandbox] = {}
        self._lock = threading.Lock()

    def get(self, session_key: str) -> KernelSandbox:
        """The session's sandbox; its kernel starts (or leaves the pool) on the first run."""
        with self._lock:
            sandbox = self._sessions.get(session_key)
            if sandbox is None:
                sandbox = KernelSandbox(lambda: self._pool.take(session_key), self._grace)
                self._sessions[session_key] = sandbox
            return sandbox

    def release(self, session_key: str) -> None:
        """Stop the session's kernel; a later `get` starts a fresh one."""
        with self._lock:
            sandbox = self._sessions.pop(session_key, None)
        if sandbox is not None:
            sandbox.close()

    def reap_idle(self) -> list[str]:
        """Stop sessions idle longer than the idle limit (skipping busy ones); their keys."""
        with self._lock:
            retired = {
                key: sandbox
                for key, sandbox in self._sessions.items()
                if sandbox.retire_if_idle(self._idle_s)
            }
            for key in retired:
                del self._sessions[key]
        for sandbox in retired.values():
            sandbox.close()
        return list(retired)

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
