"""The sandbox interface: what the IPython tool and the session's files need from any backend
(docker, local)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from pydantic import BaseModel, Field

from taskyard.files.info import FileInfo, FileListing

__all__ = [
    "CodeSandbox",
    "DisplayOutput",
    "ExecutionResult",
    "InterpreterCopy",
    "SandboxProvider",
]


class DisplayOutput(BaseModel):
    """One rich output of a cell (Jupyter's display_data): a figure, an image, an HTML table.
    Checked on the worker's side: `data` decoded, an image's size read from its own header."""

    mime: str  # one of taskyard.sandbox.kernel.DISPLAY_MIMES
    data: bytes
    text: str = ""  # the object's repr: what the model reads of it
    kind: str  # "figure", "table", "image" or "html"
    width: int | None = None
    height: int | None = None


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
    display: list[DisplayOutput] = Field(default_factory=list)  # rich outputs, in order


class CodeSandbox(Protocol):
    """One session's long-lived interpreter."""

    def run(self, code: str, timeout: float) -> ExecutionResult: ...

    def cancel(self) -> bool:
        """Stop the running cell from another thread; False when none runs."""
        ...

    def write_file(self, path: str, data: bytes) -> FileInfo:
        """Put a file into the working directory (its kernel starts if it has none)."""
        ...

    def read_file(self, path: str, limit: int) -> bytes:
        """A regular file of the working directory, if it is at most `limit` bytes."""
        ...

    def list_files(self) -> FileListing:
        """The working directory's regular files."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class InterpreterCopy:
    """What a fork copied of a running interpreter: all of it but `skipped` (the names and
    files left out, each with why)."""

    skipped: dict[str, str] = field(default_factory=dict)
    bytes: int = 0  # the snapshot's size


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

    def find(self, session_key: str) -> CodeSandbox | None:
        """The session's sandbox if its kernel runs (so it has files), else None."""
        ...

    def interrupt(self, session_key: str) -> bool:
        """Stop the session's running cell (see `CodeSandbox.cancel`); False when none runs."""
        ...

    def fork(self, source_key: str, new_key: str) -> InterpreterCopy | None:
        """Give session `new_key` a copy of `source_key`'s running interpreter (its namespace
        and working directory): what was left out, or None when the source has none here
        (nothing to copy). Raises `SandboxBusy` when a cell runs in the source, and
        `SandboxUnavailable` saying why when it cannot copy one."""
        ...

    def release(self, session_key: str) -> None: ...

    def check(self) -> None:
        """Start, use and stop one kernel; raises `SandboxUnavailable` saying why it fails."""
        ...

    def remove_orphans(self) -> int:
        """Remove what an earlier run of this worker (its label and node) left; how many."""
        ...

    def close_all(self) -> None: ...

    def reap_idle(self) -> list[str]:
        """Stop sessions idle past the idle limit; their keys. Call it periodically."""
        ...

    def forget(self, session_key: str, reason: str) -> None:
        """The session's state is gone for `reason` (elsewhere, or here): its next call here
        starts afresh and says so."""
        ...

    def lost_reason(self, session_key: str) -> str | None:
        """Why the session's state was lost, if its next call is to say so."""
        ...

    @property
    def place(self) -> str | None:
        """Where another worker could take this one's kernels over from (the docker
        backend: its engine), or None when they end with this worker."""
        ...

    def hand_off(self, lease_s: float) -> dict[str, str]:
        """Let idle sessions' kernels with state outlive this worker for `lease_s`, for
        another worker to `take_over`: their handles by session key (none where `place` is
        None). For a planned exit."""
        ...

    def take_over(self, session_key: str, handle: str) -> None:
        """Make a kernel another worker handed off the session's, state and all; raises
        `SandboxUnavailable` saying why it cannot."""
        ...
