"""The tool worker's side of a session's files (see `taskyard.files.transfer`): a write puts
the staged upload into the session's sandbox, starting it if need be; a read or a listing
looks at the sandbox's working directory as it is (what the session's code wrote too) and
never starts one. Each request becomes one `FilesReply`; nothing here raises for a refusal."""

from __future__ import annotations

from dataclasses import dataclass

from taskyard.files.transfer import FilesReply
from taskyard.plumbing.settings import FileSettings
from taskyard.runtime.jobs import SessionFilesJob
from taskyard.sandbox import SandboxError, SandboxProvider
from taskyard.sandbox.errors import FileRefused, NoLiveSandbox, SandboxClosed

__all__ = ["FileLimits", "serve"]

_NO_SESSION = (
    "no live sandbox holds this session: it has not started one yet (upload a file or run a "
    "task first), or it was reaped, and its files with it"
)


@dataclass(frozen=True)
class FileLimits:
    max_bytes: int  # one file, either way
    session_max_bytes: int  # the working directory's files after an upload

    @classmethod
    def from_settings(cls, settings: FileSettings) -> FileLimits:
        return cls(settings.files_max_bytes, settings.files_session_max_bytes)


def serve(
    job: SessionFilesJob, sandboxes: SandboxProvider, upload: bytes | None, limits: FileLimits
) -> tuple[FilesReply, bytes]:
    """The answer to one request, and a read's bytes (else b"")."""
    try:
        if job.op == "write":
            return _write(job, sandboxes, upload, limits), b""
        sandbox = sandboxes.find(job.session_key)
        if sandbox is None:
            return FilesReply(outcome="no_session", detail=_NO_SESSION), b""
        if job.op == "read":
            return FilesReply(outcome="ok"), sandbox.read_file(str(job.path), limits.max_bytes)
        return FilesReply(outcome="ok", listing=sandbox.list_files()), b""
    except (NoLiveSandbox, SandboxClosed):
        return FilesReply(outcome="no_session", detail=_NO_SESSION), b""
    except FileRefused as refused:
        return FilesReply(outcome=refused.reason, detail=_refusal(refused, limits)), b""
    except SandboxError as exc:
        return FilesReply(outcome="unavailable", detail=f"the sandbox cannot serve it: {exc}"), b""


def _write(
    job: SessionFilesJob, sandboxes: SandboxProvider, upload: bytes | None, limits: FileLimits
) -> FilesReply:
    if upload is None:
        return FilesReply(outcome="unavailable", detail="the upload expired before a tool "
                          "worker took it; send it again")  # fmt: skip
    path = str(job.path)
    sandbox = sandboxes.get(job.session_key)
    total = _total_after(sandboxes, job, path, len(upload))
    if total > limits.session_max_bytes:
        detail = (
            f"the session's files would total {total} bytes, over its limit of "
            f"{limits.session_max_bytes} (TASKYARD_FILES_SESSION_MAX_BYTES)"
        )
        return FilesReply(outcome="quota", detail=detail)
    return FilesReply(outcome="ok", file=sandbox.write_file(path, upload))


def _total_after(sandboxes: SandboxProvider, job: SessionFilesJob, path: str, size: int) -> int:
    """What the working directory's files total once `path` holds `size` bytes."""
    sandbox = sandboxes.find(job.session_key)
    if sandbox is None:
        return size
    try:
        files = sandbox.list_files().files
    except NoLiveSandbox:
        return size
    return size + sum(f.size for f in files if f.path != path)


def _refusal(refused: FileRefused, limits: FileLimits) -> str:
    if refused.reason == "too_large":
        return f"{refused}: files move at most {limits.max_bytes} bytes (TASKYARD_FILES_MAX_BYTES)"
    return str(refused)
