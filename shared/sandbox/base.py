"""The sandbox interface: what the IPython tool needs from any backend (docker, local)."""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel

__all__ = ["CodeSandbox", "ExecutionResult", "SandboxProvider"]


class ExecutionResult(BaseModel):
    """What one cell gave. `error` holds the exception (or the timeout) as text."""

    stdout: str = ""
    stderr: str = ""
    result: str | None = None  # repr of the last expression, as IPython shows it
    error: str | None = None
    timed_out: bool = False
    cancelled: bool = False  # stopped from outside (`cancel`), not by its own timeout
    state_lost: bool = False  # the interpreter was restarted: earlier variables are gone
    state_lost_reason: str | None = None  # why, when the error does not say (expiry, eviction)


class CodeSandbox(Protocol):
    """One session's long-lived interpreter."""

    def run(self, code: str, timeout: float) -> ExecutionResult: ...

    def cancel(self) -> bool:
        """Stop the running cell from another thread; False when none runs."""
        ...

    def close(self) -> None: ...


class SandboxProvider(Protocol):
    """Hands out one sandbox per session key, and reaps idle ones."""

    starts: int  # kernels started so far, for sessions and the warm pool (metrics)

    @property
    def warm(self) -> int:
        """Started kernels waiting in the warm pool."""
        ...

    def sessions(self) -> list[str]:
        """Keys of the sessions that hold a sandbox."""
        ...

    def get(self, session_key: str) -> CodeSandbox: ...

    def interrupt(self, session_key: str) -> bool:
        """Stop the session's running cell (see `CodeSandbox.cancel`); False when none runs."""
        ...

    def release(self, session_key: str) -> None: ...

    def check(self) -> None:
        """Start, use and stop one kernel; raises `SandboxUnavailable` saying why it fails."""
        ...

    def remove_orphans(self) -> int:
        """Remove what an earlier run under this worker label left; how many were removed."""
        ...

    def close_all(self) -> None: ...

    def reap_idle(self) -> list[str]:
        """Stop sessions idle past the idle limit; their keys. Call it periodically."""
        ...
