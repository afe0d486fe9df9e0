"""The kernel package where the sandbox's user can read it.

The local backend runs the kernel as uid 65534. Its source in the checkout (or site-packages)
may sit under a directory that user cannot enter: /root is 0700 on a fresh Debian, and so is
every `mktemp -d`. So each provider copies the package's modules into a directory of its own
that every user can read and only the worker can write, under the first temporary directory
whose every parent others can enter, and removes it when the provider goes.
"""

from __future__ import annotations

import shutil
import stat
import tempfile
import weakref
from pathlib import Path

from taskyard.sandbox.errors import SandboxUnavailable

__all__ = ["KERNEL_SOURCE", "KernelCopy", "reachable_by_others"]

KERNEL_SOURCE = Path(__file__).parents[1] / "kernel"
_CANDIDATES = ("/tmp", "/var/tmp", "/dev/shm")


def reachable_by_others(path: Path) -> bool:
    """Whether a user other than the owner may enter `path` and each directory above it."""
    return all(p.stat().st_mode & stat.S_IXOTH for p in (path, *path.parents))


class KernelCopy:
    """A world-readable, worker-owned copy of the kernel package; `home` goes on PYTHONPATH
    (it holds `kernel/` and nothing else)."""

    def __init__(self, source: Path = KERNEL_SOURCE) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="taskyard-kernel-", dir=_base()))
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.home, ignore_errors=True)
        package = self.home / "kernel"
        package.mkdir()
        for module in sorted(source.glob("*.py")):
            shutil.copyfile(module, package / module.name)
            (package / module.name).chmod(0o644)
        package.chmod(0o755)
        self.home.chmod(0o755)  # mkdtemp made it 0700

    @property
    def package(self) -> Path:
        return self.home / "kernel"

    def remove(self) -> None:
        self._finalizer()


def _base() -> Path:
    """The first temporary directory others can reach (TMPDIR may be a private one)."""
    for candidate in (tempfile.gettempdir(), *_CANDIDATES):
        path = Path(candidate)
        if path.is_dir() and reachable_by_others(path):
            return path
    tried = ", ".join((tempfile.gettempdir(), *_CANDIDATES))
    raise SandboxUnavailable(
        f"no temporary directory the sandbox's user can reach for the kernel (tried {tried})"
    )
