"""The sandbox error tree.

    SandboxError
    ├── SandboxUnavailable  no kernel could be started (engine down, image missing, no bwrap)
    ├── SandboxClosed       `run` on a sandbox that was released or reaped
    └── KernelGone          a kernel's process ended; backends raise it, sessions absorb it

What user code does (exceptions, timeouts, exiting the interpreter) is never an error here:
it comes back as an `ExecutionResult`.
"""

from __future__ import annotations

__all__ = ["KernelGone", "SandboxClosed", "SandboxError", "SandboxUnavailable"]


class SandboxError(Exception):
    """Base of every sandbox error."""


class SandboxUnavailable(SandboxError):
    """No kernel could be started; the message says why (engine, image, binary)."""


class SandboxClosed(SandboxError):
    """`run` on a sandbox that was released or reaped; `provider.get` hands out a fresh one."""


class KernelGone(SandboxError):
    """The kernel's process ended (or could not be reached); its state is gone."""
