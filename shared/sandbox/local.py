"""The local backend: kernel.py in Linux namespaces, for machines without a Docker engine.

This is WEAKER isolation than the docker backend: the host kernel is shared as in Docker, but
there are no cgroup limits (only rlimits: the process limit binds only when the worker runs
as root, which runs the kernel as host user nobody), no seccomp profile, and under the
`unshare` fallback the host file system stays visible. It suits a
laptop demo, not untrusted users; the provider says so in a warning when it starts.

Launchers, best first: `bwrap` (bubblewrap: new user, pid, net, ipc, uts and mount
namespaces, a read-only view of /usr, tmpfs /tmp and /work, uid 65534) and `unshare`
(namespaces only, then setpriv to uid 65534 when run as root).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shared.sandbox.channel import LineBuffer, decode_line, encode, wait_readable
from shared.sandbox.errors import KernelGone, SandboxUnavailable
from shared.sandbox.provider import KernelSandboxProvider
from shared.settings import Settings, get_settings

__all__ = ["LAUNCHERS", "LocalChannel", "LocalLimits", "LocalSandboxProvider"]

log = logging.getLogger(__name__)

KERNEL = Path(__file__).with_name("kernel.py")
INNER_KERNEL = "/opt/taskyard/kernel.py"
START_TIMEOUT_S = 15.0
NOBODY = "65534"
# Processes that only set the sandbox up; the kernel is the first process below them.
_WRAPPERS = {"bwrap", "unshare", "setpriv", "prlimit"}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)b?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """Bytes in a Docker-style size ("256m", "1g", "65536")."""
    match = _SIZE.match(text)
    if match is None:
        raise ValueError(f"not a size: {text!r}")
    number, unit = match.groups()
    return int(float(number) * 1024 ** "_kmgt".index(unit.lower() or "_"))


class LocalLimits:
    """Resource limits as rlimits, applied by `prlimit` around the launcher."""

    def __init__(self, memory: str, pids: int, disk: str) -> None:
        self.memory = memory
        self.pids = pids
        self.disk = disk

    def prlimit(self) -> list[str]:
        argv = ["prlimit", f"--as={parse_size(self.memory)}", f"--fsize={parse_size(self.disk)}"]
        if _is_root():
            # The kernel then runs as host user nobody, whose process count this limit binds
            # (shared by all local sandboxes). Any other user's count holds their whole desktop.
            argv.append(f"--nproc={self.pids}")
        return [*argv, "--nofile=256", "--core=0", "--"]


def _is_root() -> bool:
    return os.geteuid() == 0


def _setpriv() -> list[str]:
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


def _bwrap(python: str, limits: LocalLimits) -> list[str]:
    disk = str(parse_size(limits.disk))
    argv = ["bwrap", "--unshare-all", "--die-with-parent", "--cap-drop", "ALL"]
    argv += ["--ro-bind", "/usr", "/usr"]
    for top in ("/lib", "/lib64", "/bin"):
        path = Path(top)
        if path.is_symlink():  # merged /usr: recreate the link rather than bind it
            argv += ["--symlink", os.readlink(path), top]
        elif path.exists():
            argv += ["--ro-bind", top, top]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    argv += ["--size", disk, "--tmpfs", "/tmp", "--size", disk, "--tmpfs", "/work"]
    argv += ["--ro-bind", str(KERNEL), INNER_KERNEL, "--chdir", "/work"]
    argv += ["--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/work"]
    argv += ["--setenv", "PYTHONDONTWRITEBYTECODE", "1", "--uid", NOBODY, "--gid", NOBODY]
    # Root first becomes nobody: bwrap then builds an unprivileged user namespace.
    drop_root = _setpriv() if _is_root() else []
    return [*drop_root, *limits.prlimit(), *argv, python, INNER_KERNEL]


def _unshare(python: str, limits: LocalLimits) -> list[str]:
    namespaces = ["--net", "--pid", "--ipc", "--uts", "--mount", "--fork", "--mount-proc"]
    if _is_root():
        inner = [*_setpriv(), "--no-new-privs"]
    else:
        namespaces = ["--user", "--map-root-user", *namespaces]
        inner = []
    return [*limits.prlimit(), "unshare", *namespaces, *inner, python, str(KERNEL)]


Launcher = Callable[[str, LocalLimits], list[str]]
LAUNCHERS: dict[str, Launcher] = {"bwrap": _bwrap, "unshare": _unshare}


class LocalChannel:
    """A `KernelChannel` to kernel.py in a namespaced child process."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self._process = process
        self._lines = LineBuffer()
        self._closed = False

    @classmethod
    def start(cls, argv: list[str]) -> LocalChannel:
        """Start the launcher and wait for the kernel's ready line."""
        process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # cell output is captured in the kernel; this is noise
            cwd="/tmp",
            start_new_session=True,  # its own process group, so close() reaches every process
        )
        channel = cls(process)
        try:
            ready = channel.receive(START_TIMEOUT_S)
        except KernelGone as exc:
            channel.close()
            raise SandboxUnavailable(f"{argv[0]}: the kernel did not start: {exc}") from exc
        if not (ready or {}).get("ready"):
            channel.close()
            raise SandboxUnavailable(f"no ready line within {START_TIMEOUT_S:g}s")
        return channel

    def send(self, message: dict[str, Any]) -> None:
        stdin = self._process.stdin
        assert stdin is not None
        try:
            stdin.write(encode(message))
            stdin.flush()
        except (BrokenPipeError, ValueError) as exc:
            raise KernelGone(f"cannot write to the kernel: {exc}") from exc

    def receive(self, timeout: float) -> dict[str, Any] | None:
        stdout = self._process.stdout
        assert stdout is not None
        while (line := self._lines.pop_line()) is None:
            if not wait_readable(stdout.fileno(), timeout):
                return None
            chunk = os.read(stdout.fileno(), 1 << 16)
            if not chunk:
                raise KernelGone("the kernel's output ended")
            self._lines.feed(chunk)
        return decode_line(line)

    def interrupt(self) -> None:
        # Only the kernel: a launcher killed by SIGINT could orphan it.
        try:
            os.kill(_kernel_pid(self._process.pid), signal.SIGINT)
        except ProcessLookupError as exc:
            raise KernelGone("the kernel is gone") from exc

    def alive(self) -> bool:
        return self._process.poll() is None

    def exit_reason(self) -> str:
        try:
            code = self._process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return ""
        if code < 0:
            return f"killed by {signal.Signals(-code).name}"
        return f"the process exited with code {code}"

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(ProcessLookupError):  # already gone: that is the goal
            os.killpg(self._process.pid, signal.SIGKILL)
        self._process.wait()
        for stream in (self._process.stdin, self._process.stdout):
            if stream is not None:
                stream.close()


def _kernel_pid(pid: int) -> int:
    """Follow the launchers' first children down to the kernel process."""
    proc = Path("/proc")
    while (proc / str(pid) / "comm").read_text().strip() in _WRAPPERS:
        children = (proc / str(pid) / "task" / str(pid) / "children").read_text().split()
        if not children:
            raise ProcessLookupError(pid)
        pid = int(children[0])
    return pid


class LocalSandboxProvider(KernelSandboxProvider):
    """A `SandboxProvider` without Docker: weaker isolation, the same behaviour."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        launcher: str | None = None,
        python: str | None = None,
        pool_size: int | None = None,
        idle_s: float | None = None,
    ) -> None:
        settings = settings or get_settings()
        name = launcher or next((n for n in LAUNCHERS if shutil.which(n)), "")
        if name not in LAUNCHERS or not shutil.which(name) or not shutil.which("prlimit"):
            raise SandboxUnavailable(f"no sandbox launcher found (tried {', '.join(LAUNCHERS)})")
        python = python or shutil.which("python3", path="/usr/bin:/bin") or ""
        limits = LocalLimits(settings.sandbox_memory, settings.sandbox_pids, settings.sandbox_disk)
        self._argv = LAUNCHERS[name](python, limits)
        self.launcher = name
        log.warning(
            "sandbox backend 'local' (%s): WEAKER isolation than the docker backend "
            "(no cgroup limits, no seccomp%s); use it for demos, not for untrusted code",
            name,
            "" if name == "bwrap" else ", host file system visible",
        )
        super().__init__(
            lambda _session_key: LocalChannel.start(self._argv),
            pool_size=settings.sandbox_warm_pool if pool_size is None else pool_size,
            idle_s=settings.sandbox_idle_s if idle_s is None else idle_s,
        )
