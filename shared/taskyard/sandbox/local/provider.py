"""The local backend: the kernel in Linux namespaces, for machines without a Docker engine.

This is WEAKER isolation than the docker backend, and the provider's start-up warning lists
exactly what it does not enforce on this machine. What it does: bubblewrap's namespaces and
read-only file system (`launchers.py`), the kernel's seccomp filter, and, where this worker
may write cgroups, one cgroup per sandbox holding memory (swap included), process and CPU
limits (`cgroups.py`). Without writable cgroups there is no process or CPU limit and memory
is capped per process (address space), not per sandbox.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import uuid
from typing import Any

from taskyard.plumbing.settings import SandboxSettings
from taskyard.sandbox.channel import (
    OutputTail,
    ReplyLines,
    describe_exit,
    encode_line,
    wait_readable,
    write_within,
)
from taskyard.sandbox.demand import PoolBounds, pool_bounds
from taskyard.sandbox.errors import KernelGone, SandboxUnavailable
from taskyard.sandbox.local.cgroups import (
    CgroupLimits,
    CgroupTree,
    SandboxCgroup,
    find_cgroups,
    safe_name,
)
from taskyard.sandbox.local.kernel_copy import KernelCopy
from taskyard.sandbox.local.launchers import LAUNCHERS, LaunchSpec, explain_failure, parse_size
from taskyard.sandbox.provider import KernelSandboxProvider, SandboxLimits

__all__ = ["LocalChannel", "LocalSandboxProvider"]

log = logging.getLogger(__name__)

START_TIMEOUT_S = 15.0
# taskyard-<worker label>-<provider id>-<n>: a label may hold "-", the provider id never.
_CGROUP_NAME = re.compile(r"^taskyard-(?P<label>.+)-(?P<owner>[0-9a-f]{12})-\d+$")


class LocalChannel:
    """A `KernelChannel` to the kernel in a namespaced child process."""

    def __init__(
        self, process: subprocess.Popen[bytes], cgroup: SandboxCgroup | None, memory: str
    ) -> None:
        self._process = process
        self._cgroup = cgroup
        self._memory = memory
        self._lines = ReplyLines()
        self._stderr = OutputTail()
        self._send_lock = threading.Lock()
        self._broken = False  # a request was left half written
        self._closed = False
        assert process.stderr is not None and process.stdin is not None
        os.set_blocking(process.stderr.fileno(), False)
        os.set_blocking(process.stdin.fileno(), False)  # written within a deadline

    @classmethod
    def start(
        cls,
        argv: list[str],
        env: dict[str, str],
        *,
        launcher: str,
        cgroup: SandboxCgroup | None = None,
        memory: str = "",
    ) -> LocalChannel:
        """Start the launcher and wait for the kernel's ready line.

        Raises `SandboxUnavailable` with the launcher's own message when the kernel does not
        start (bubblewrap refused to mount /proc, namespaces not allowed, ...).
        """
        process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,  # only the launcher and the supervisor write here
            env=env,  # never the worker's: it would be readable in /proc/*/environ
            cwd="/tmp",
            start_new_session=True,  # its own process group, so close() reaches every process
        )
        channel = cls(process, cgroup, memory)
        try:
            ready = channel.receive(time.monotonic() + START_TIMEOUT_S)
            if not (ready or {}).get("ready"):
                raise KernelGone(f"no ready line within {START_TIMEOUT_S:g}s")
        except KernelGone as exc:
            said = channel.stderr(wait_s=2.0) or str(exc)
            channel.close()
            raise SandboxUnavailable(explain_failure(launcher, said)) from exc
        return channel

    def send(self, message: dict[str, Any], deadline: float) -> None:
        stdin = self._process.stdin
        assert stdin is not None
        with self._send_lock:
            if self._broken:
                raise KernelGone("a request to the kernel was left half written")
            try:
                write_within(stdin.fileno(), encode_line(message), deadline)
            except KernelGone:
                self._broken = True
                raise
            except ValueError as exc:  # closed meanwhile
                self._broken = True
                raise KernelGone("the kernel's channel was closed") from exc

    def receive(self, deadline: float) -> dict[str, Any] | None:
        stdout = self._process.stdout
        assert stdout is not None
        while (reply := self._lines.pop()) is None:
            if not wait_readable(stdout.fileno(), deadline):
                return None
            chunk = os.read(stdout.fileno(), 1 << 16)
            if not chunk:
                raise KernelGone("the kernel's output ended")
            self._lines.feed(chunk)
        return reply

    def alive(self) -> bool:
        return not self._broken and self._process.poll() is None

    def stderr(self, wait_s: float = 0.0) -> str:
        """What the launcher and the kernel wrote to stderr (the last few KB), once they
        exited or `wait_s` passed."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=wait_s)
        pipe = self._process.stderr
        assert pipe is not None
        with contextlib.suppress(BlockingIOError, ValueError):
            while chunk := os.read(pipe.fileno(), 1 << 16):
                self._stderr.feed(chunk)
        return self._stderr.text()

    def exit_reason(self) -> str:
        try:
            code = self._process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return ""
        if self._cgroup is not None and self._cgroup.oom_kills():
            return f"out of memory: the sandbox's limit is {self._memory}"
        said = self.stderr().splitlines()
        return describe_exit(code) + (f"; {said[-1]}" if said else "")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(ProcessLookupError):  # already gone: that is the goal
            os.killpg(self._process.pid, signal.SIGKILL)
        self._process.wait()
        if self._cgroup is not None:
            self._cgroup.remove()  # also what left the process group (the sandbox's session)
        for stream in (self._process.stdin, self._process.stdout, self._process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):  # a broken pipe flushing stdin: gone anyway
                    stream.close()


class LocalSandboxProvider(KernelSandboxProvider):
    """A `SandboxProvider` without Docker: weaker isolation, the same behaviour."""

    def __init__(
        self,
        settings: SandboxSettings,
        *,
        launcher: str | None = None,
        python: str | None = None,
        pool_size: int | None = None,
        pool: PoolBounds | None = None,
        idle_s: float | None = None,
        limits: SandboxLimits | None = None,
        node: str = "-",
    ) -> None:
        name = launcher or next((n for n in LAUNCHERS if shutil.which(n)), "")
        if name not in LAUNCHERS or not shutil.which(name) or not shutil.which("prlimit"):
            raise SandboxUnavailable(f"no sandbox launcher found (tried {', '.join(LAUNCHERS)})")
        self.launcher = name
        self._memory = settings.sandbox_memory
        self._cgroups, no_cgroups = find_cgroups(settings.sandbox_cgroup_parent)
        self._cgroup_limits = CgroupLimits(
            parse_size(settings.sandbox_memory), settings.sandbox_pids, settings.sandbox_cpus
        )
        # Not the package where it lies: its parents may be closed to the sandbox's user.
        self._kernel = KernelCopy()
        spec = LaunchSpec(
            python=python or shutil.which("python3", path="/usr/bin:/bin") or "",
            kernel_home=self._kernel.home,
            memory=self._cgroup_limits.memory,
            disk=parse_size(settings.sandbox_disk),
            rlimit_memory=self._cgroups is None,
        )
        self._argv, self._env = LAUNCHERS[name](spec)
        self._no_cgroups = no_cgroups
        # Its cgroups' names: a restart of this worker (label and node) removes its leftovers.
        self._label = safe_name(f"{settings.sandbox_worker_label}.{node}")
        self._owner = uuid.uuid4().hex[:12]
        self._serial = itertools.count(1)
        log.warning(
            "sandbox backend 'local' (%s): WEAKER isolation than the docker backend; not "
            "enforced here: %s. Use it for demos, not for untrusted code.",
            name,
            "; ".join(self.unenforced()),
        )
        super().__init__(
            self._start_kernel,
            pool=pool or pool_bounds(settings, pool_size),
            idle_s=settings.sandbox_idle_s if idle_s is None else idle_s,
            limits=limits or SandboxLimits.from_settings(settings),
            interrupt_grace_s=settings.sandbox_interrupt_grace_s,
        )

    def close_all(self) -> None:
        super().close_all()
        self._kernel.remove()

    def unenforced(self) -> list[str]:
        """What the docker backend enforces and this one, on this machine, does not."""
        gaps = [
            "the seccomp filter is a denylist of dangerous calls (Docker's default profile "
            "is an allowlist)",
            "/proc inside is not masked as Docker masks it",
        ]
        if self.launcher != "bwrap":
            gaps.append("the host's file system is visible (and writable where uid 65534 may)")
        if self._cgroups is None:
            gaps.append(
                "no per-sandbox memory, process or CPU limit (no writable cgroups: "
                f"{self._no_cgroups}); memory is capped per process only"
            )
        return gaps

    def remove_orphans(self) -> int:
        """Remove cgroups an earlier run under this worker label left; how many."""
        if self._cgroups is None:
            return 0
        return self._cgroups.remove_stale(self._left_by_earlier_run)

    def _left_by_earlier_run(self, cgroup_name: str) -> bool:
        named = _CGROUP_NAME.match(cgroup_name)
        return named is not None and named["label"] == self._label and named["owner"] != self._owner

    def _start_kernel(self, session_key: str | None) -> LocalChannel:
        cgroup = self._new_cgroup(self._cgroups) if self._cgroups is not None else None
        argv = [*cgroup.join_argv(), *self._argv] if cgroup is not None else self._argv
        try:
            return LocalChannel.start(
                argv, self._env, launcher=self.launcher, cgroup=cgroup, memory=self._memory
            )
        except BaseException:
            if cgroup is not None:
                cgroup.remove()
            raise

    def _new_cgroup(self, tree: CgroupTree) -> SandboxCgroup:
        name = f"taskyard-{self._label}-{self._owner}-{next(self._serial)}"  # see _CGROUP_NAME
        try:
            return tree.create(name, self._cgroup_limits)
        except OSError as exc:
            raise SandboxUnavailable(f"cannot create the sandbox's cgroup {name}: {exc}") from exc
