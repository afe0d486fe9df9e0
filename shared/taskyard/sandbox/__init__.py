"""Code sandboxes: one stateful interpreter per session, behind one small interface.

Use: ``make_sandbox_provider(settings).get(keys.session_key(tenant, sid)).run(code, timeout)``;
``provider.interrupt(session_key)`` stops a running cell from another thread. A result's
``display`` holds the cell's rich outputs; ``write_file``, ``read_file`` and ``list_files``
reach the session's working directory (``provider.find`` gives a session's running sandbox).
The docker backend (`taskyard.sandbox.docker`) needs the Docker SDK, from the ``service``
extra.
"""

from collections.abc import Callable

from taskyard.plumbing.settings import SandboxSettings
from taskyard.sandbox.base import (
    CodeSandbox,
    DisplayOutput,
    ExecutionResult,
    InterpreterCopy,
    SandboxProvider,
)
from taskyard.sandbox.errors import (
    FileRefused,
    KernelGone,
    KernelProtocolError,
    NoLiveSandbox,
    SandboxBusy,
    SandboxClosed,
    SandboxError,
    SandboxLimitReached,
    SandboxUnavailable,
)
from taskyard.sandbox.local.provider import LocalSandboxProvider
from taskyard.sandbox.provider import SandboxLimits

__all__ = [
    "BACKENDS",
    "CodeSandbox",
    "DisplayOutput",
    "ExecutionResult",
    "FileRefused",
    "InterpreterCopy",
    "KernelGone",
    "KernelProtocolError",
    "LocalSandboxProvider",
    "NoLiveSandbox",
    "SandboxBusy",
    "SandboxClosed",
    "SandboxError",
    "SandboxLimitReached",
    "SandboxLimits",
    "SandboxProvider",
    "SandboxUnavailable",
    "make_sandbox_provider",
]


def _docker(settings: SandboxSettings, node: str) -> SandboxProvider:
    # Imported when chosen: the agent library alone installs no Docker SDK.
    from taskyard.sandbox.docker.provider import DockerSandboxProvider

    return DockerSandboxProvider(settings, node=node)


def _local(settings: SandboxSettings, node: str) -> SandboxProvider:
    return LocalSandboxProvider(settings, node=node)


# settings.sandbox_backend names one of these.
BACKENDS: dict[str, Callable[[SandboxSettings, str], SandboxProvider]] = {
    "docker": _docker,
    "local": _local,
}


def make_sandbox_provider(settings: SandboxSettings, node: str = "-") -> SandboxProvider:
    """The provider `settings.sandbox_backend` names, for the tool worker `node` (its Celery
    node name: what it left behind, it removes at its next start).

    Raises `SandboxUnavailable` when that backend cannot run here (no engine, no launcher).
    """
    try:
        backend = BACKENDS[settings.sandbox_backend]
    except KeyError:
        known = ", ".join(sorted(BACKENDS))
        name = settings.sandbox_backend
        raise ValueError(f"unknown sandbox_backend {name!r}; known: {known}") from None
    return backend(settings, node)
