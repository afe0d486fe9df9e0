"""The sandbox error tree.

    SandboxError
    ├── SandboxUnavailable     no kernel could be started (engine down, image missing, the
    │                          launcher refused: its own message, and what to change)
    ├── SandboxLimitReached    the tenant or the worker is at its live-sandbox limit, all busy
    ├── SandboxClosed          `run` on a sandbox that was released or reaped
    ├── SandboxBusy            a file request that found the session's call still running
    │                          after its wait
    ├── NoLiveSandbox          a file read of a session whose kernel is not running: it never
    │                          started, was reaped, or died, and its files went with it
    ├── FileRefused            a file request the working directory refuses; `reason` says
    │                          why: "invalid" path, "not_found", "not_a_file", "too_large",
    │                          "no_space"
    └── KernelGone             a kernel's process ended; backends raise it, sessions absorb it
        └── KernelProtocolError  the kernel sent what no honest kernel sends (an oversized,
                                 malformed or unmatched reply); it is stopped like a dead one

What user code does (exceptions, timeouts, exiting the interpreter) is never an error here:
it comes back as an `ExecutionResult`.
"""

from __future__ import annotations

from typing import Literal

from taskyard.errors import TaskyardError

__all__ = [
    "FileRefused",
    "KernelGone",
    "KernelProtocolError",
    "NoLiveSandbox",
    "SandboxBusy",
    "SandboxClosed",
    "SandboxError",
    "SandboxLimitReached",
    "SandboxUnavailable",
]


class SandboxError(TaskyardError):
    """Base of every sandbox error."""


class SandboxUnavailable(SandboxError):
    """No kernel could be started; the message says why (engine, image, launcher, cgroups)."""


class SandboxLimitReached(SandboxError):
    """A new sandbox would pass a live-sandbox limit and no idle one could be evicted."""


class SandboxClosed(SandboxError):
    """`run` on a sandbox that was released or reaped; `provider.get` hands out a fresh one."""


class SandboxBusy(SandboxError):
    """The session's call still ran when a file request's wait for it ended."""


class NoLiveSandbox(SandboxError):
    """The session has no running kernel, so no working directory: nothing to read."""


# Why a file request is refused: the kernel's words for it (`outputs.refusal` checks them),
# and the worker's own size check ("too_large").
Refusal = Literal["invalid", "not_found", "not_a_file", "no_space", "too_large"]
KERNEL_REFUSALS: tuple[Refusal, ...] = ("invalid", "not_found", "not_a_file", "no_space")


class FileRefused(SandboxError):
    """A file request refused, for the `reason` named (see the tree above)."""

    def __init__(self, reason: Refusal, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class KernelGone(SandboxError):
    """The kernel's process ended (or could not be reached); its state is gone."""


class KernelProtocolError(KernelGone):
    """The kernel broke the protocol; the session stops it and says state was lost."""
