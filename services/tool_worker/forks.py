"""The tool worker's side of a session fork (`taskyard.runtime.forks`): the source's running
interpreter copied, state and working directory, for the new session, on this worker (the one
holding the source's). Each request becomes one `ForkReply`; nothing here raises for a
refusal."""

from __future__ import annotations

from taskyard.runtime.forks import ForkReply
from taskyard.runtime.jobs import SessionForkJob
from taskyard.sandbox import SandboxBusy, SandboxError, SandboxProvider

__all__ = ["fork"]


def fork(job: SessionForkJob, sandboxes: SandboxProvider) -> ForkReply:
    """Fork the job's source interpreter into its new session: `copied` (with what was left
    out), or `none` when the source has no running interpreter here (the new session starts
    afresh on first use)."""
    try:
        copied = sandboxes.fork(job.session_key, job.new_session_key)
    except SandboxBusy as exc:
        return ForkReply(outcome="busy", detail=str(exc))
    except SandboxError as exc:  # SandboxUnavailable: this backend cannot fork, and why
        return ForkReply(outcome="unavailable", detail=str(exc))
    if copied is None:
        return ForkReply(outcome="none")
    return ForkReply(outcome="copied", skipped=copied.skipped)
