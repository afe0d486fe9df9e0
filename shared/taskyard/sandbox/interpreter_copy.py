"""A live session's interpreter copied into a new session: the sandbox side of a fork.

No backend can fork the executor process itself with its walls intact (docs/security.md), so
the copy is a transfer of state between two interpreters, over what every backend already
has: cells and file requests. The source saves its namespace into a snapshot
(`kernel/snapshot.py`), the working directory's files are copied to the new session's, and
the new session loads the snapshot. Where one fork server serves both sessions the snapshot
stays in memory: a sealed memory file the kernel hands from one to the other
(`kernel/handover.py`), mapped copy-on-write by the new session. Elsewhere it is written to
the source's working directory, copied with the other files, and removed from the source.
In memory, the fork is made once the source's snapshot is taken and its files copied: the
kernel writes the snapshot and loads it in the new session behind that (`kernel/handover.py`),
and the new session's first call waits for the load.
Both sessions are their own from then on: nothing one does afterwards reaches the other.

The source is held throughout (`KernelSandbox.exclusive`): no cell or file request of its
session runs between the snapshot and the copy of its files.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, ValidationError

from taskyard.sandbox.base import ExecutionResult, InterpreterCopy
from taskyard.sandbox.errors import FileRefused, SandboxUnavailable
from taskyard.sandbox.kernel import MAX_REQUEST_BYTES
from taskyard.sandbox.session import KernelSandbox

__all__ = ["MAX_COPIED_FILE_BYTES", "SNAPSHOT_DIR", "copy_interpreter"]

SNAPSHOT_DIR = ".taskyard-fork"
_CELL_TIMEOUT_S = 120.0  # a snapshot of a session's whole memory: seconds at most
# The largest file one write request carries (base64 within MAX_REQUEST_BYTES, with room for
# the request's other fields); the snapshot's parts are smaller (`snapshot.PART_BYTES`).
MAX_COPIED_FILE_BYTES = MAX_REQUEST_BYTES * 3 // 4 - (1 << 20)
_SNAPSHOT = "__import__('kernel.snapshot').snapshot"
_SAVE = f"{_SNAPSHOT}.save(globals(), {SNAPSHOT_DIR!r})"
_LOAD = f"{_SNAPSHOT}.load(globals(), {SNAPSHOT_DIR!r})"
_DISCARD = f"{_SNAPSHOT}.discard({SNAPSHOT_DIR!r})"
_SAVING, _LOADING = "saving the interpreter's state", "loading the interpreter's state"
_MORE_FILES = {"(more files)": "the working directory has more files than one copy takes"}


class _Saved(BaseModel):
    """The save cell's report (its stdout's last line)."""

    model_config = ConfigDict(extra="forbid")

    skipped: dict[str, str]
    bytes: int
    parts: int


def copy_interpreter(source: KernelSandbox, target: KernelSandbox) -> InterpreterCopy:
    """Copy the source's namespace and working directory into `target`, whose kernel starts
    here. Raises `SandboxUnavailable` saying why when the copy cannot be made (the snapshot
    does not fit the working directory or the memory share, a cell of the copy fails); what
    `run` raises."""
    saved, handed = _save(source, target)
    try:
        skipped = saved.skipped | _copy_files(source, target, saved.parts)
    finally:
        if not handed:
            _cell(source, _DISCARD, "removing the snapshot")
    if handed:
        target.holds_state()
    else:
        _cell(target, _LOAD, _LOADING)
    return InterpreterCopy(skipped, saved.bytes)


def _save(source: KernelSandbox, target: KernelSandbox) -> tuple[_Saved, bool]:
    """The source's snapshot, and whether it was handed to the target inside their kernel (one
    kernel serves both); else it is in the source's working directory."""
    handed = source.hand_over(target, _CELL_TIMEOUT_S)
    if handed is None:
        return _saved(_cell(source, _SAVE, _SAVING)), False
    return _saved(_stdout(handed, _SAVING)), True


def _cell(sandbox: KernelSandbox, code: str, what: str) -> str:
    """Run one of the copy's own cells; its stdout. Any failure refuses the fork."""
    return _stdout(sandbox.run(code, _CELL_TIMEOUT_S), what)


def _stdout(result: ExecutionResult, what: str) -> str:
    """A step of the copy's stdout; any failure refuses the fork, saying `what` failed."""
    if result.error or result.state_lost or result.timed_out:
        reason = (result.error or "the interpreter was lost").strip().splitlines()[-1]
        raise SandboxUnavailable(f"{what} failed: {reason}")
    return result.stdout


def _saved(stdout: str) -> _Saved:
    lines = stdout.strip().splitlines()
    try:
        return _Saved.model_validate_json(lines[-1] if lines else "")
    except ValidationError as exc:
        raise SandboxUnavailable(f"saving the interpreter's state said {stdout[-200:]!r}") from exc


def _copy_files(source: KernelSandbox, target: KernelSandbox, parts: int) -> dict[str, str]:
    """The working directory, the snapshot with it; the files left out, and why (a snapshot
    part that cannot be copied refuses the fork). Inside the kernel when one serves both
    sessions; else through the worker: the snapshot's parts first, then every other file."""
    beside = target.copy_files_from(source)
    if beside is not None:
        return _MORE_FILES if beside[1] else {}
    for index in range(parts):
        path = f"{SNAPSHOT_DIR}/{index:05d}"
        target.write_file(path, source.read_file(path, MAX_COPIED_FILE_BYTES))
    listing = source.list_files()
    skipped = dict(_MORE_FILES) if listing.truncated else {}
    for info in listing.files:
        if info.path.startswith(SNAPSHOT_DIR + "/"):
            continue
        try:
            target.write_file(info.path, source.read_file(info.path, MAX_COPIED_FILE_BYTES))
        except FileRefused as refused:
            if refused.reason == "no_space":
                raise
            skipped[f"file {info.path}"] = str(refused)  # gone meanwhile, or too large
    return skipped
