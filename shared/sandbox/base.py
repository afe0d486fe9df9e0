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
    state_lost: bool = False  # the interpreter was restarted: earlier variables are gone


class CodeSandbox(Protocol):
    """One session's long-lived interpreter."""

    def run(self, code: str, timeout: float) -> ExecutionResult: ...

    def close(self) -> None: ...


class SandboxProvider(Protocol):
    """Hands out one sandbox per session key, and reaps idle ones."""

    def get(self, session_key: str) -> CodeSandbox: ...

    def release(self, session_key: str) -> None: ...

    def close_all(self) -> None: ...

    def reap_idle(self) -> list[str]:
        """Stop sessions idle past the idle limit; their keys. Call it periodically."""
        ...
