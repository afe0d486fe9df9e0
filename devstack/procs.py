"""Child processes for development: the local stack, tests and benchmarks start services with it.

Every child runs in its own session (process group) with its output in a log file, and is
stopped by its own id: SIGTERM to its group, then SIGKILL if it lingers. A child that exits or
does not get ready in time raises `ChildFailed`, quoting the end of its log.
"""

from __future__ import annotations

import os
import random
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import httpx

__all__ = ["ROOT", "Child", "ChildFailed", "Processes", "free_port"]

ROOT = Path(__file__).resolve().parent.parent  # services run from here, so plugins import

# How long a child may take to be ready. A child that dies fails at once; one that is only slow
# is slow because the machine is (a proxy took over 60 s to import at load 27 on 2 cores).
READY_S = 180.0

# What a service started on port 0 prints first (the scripted model, the LLM proxy).
_ANNOUNCED = re.compile(r"^listening on (http://\S+)\s*$", re.MULTILINE)


class ChildFailed(RuntimeError):
    """A child process exited, or did not get ready in time; the message quotes its log."""


def free_port() -> int:
    """A loopback port free right now, for a server started next. It is never one this process
    handed out before (two stacks, or two services of one, never race for a port), and it lies
    below the kernel's ephemeral range, so no client connection's source port and no program's
    port 0 lands on it before its server binds it."""
    low, high = _listening_range()
    with _handing_out:
        for _ in range(1000):
            port = _draws.randrange(low, high)
            if port not in _handed_out and _bindable(port):
                _handed_out.add(port)
                return port
    raise RuntimeError(f"no free loopback port in {low}-{high - 1}")


_handed_out: set[int] = set()
_handing_out = threading.Lock()
_draws = random.SystemRandom()  # no one's seed repeats it in another process
_LOWEST_PORT = 10000  # below: ports well-known services may own


def _listening_range() -> tuple[int, int]:
    """The ports below the ephemeral range (Linux's default starts at 32768)."""
    try:
        ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral = 32768
    return _LOWEST_PORT, max(ephemeral, _LOWEST_PORT + 1000)


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@dataclass
class Child:
    """One started process: its command line, its log, and ways to wait for it and stop it."""

    name: str
    argv: list[str]
    log: Path
    popen: subprocess.Popen[bytes]
    log_start: int = 0  # where this run's output begins in a log kept across restarts

    @property
    def pid(self) -> int:
        return self.popen.pid

    def log_text(self, after: int = 0) -> str:
        """The log from character `after` on."""
        return self.log.read_text(errors="replace")[after:] if self.log.exists() else ""

    def check_alive(self) -> None:
        code = self.popen.poll()
        if code is not None:
            raise ChildFailed(f"{self.name} exited with {code}:\n{self.log_text()[-3000:]}")

    def wait_until(self, ready: Callable[[], bool], what: str, timeout_s: float = READY_S) -> None:
        """Poll `ready` until true; fail at once if the child exits, or after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.check_alive()
            if ready():
                return
            time.sleep(0.05)
        tail = self.log_text()[-3000:]
        raise ChildFailed(f"{self.name}: {what} not within {timeout_s:.0f} s:\n{tail}")

    def wait_http(self, url: str, timeout_s: float = READY_S) -> None:
        """Until `url` answers 200."""
        self.wait_until(lambda: _answers(url), f"200 from {url}", timeout_s)

    def wait_log(self, marker: str, after: int = 0, timeout_s: float = READY_S) -> None:
        """Until the child logs `marker` after character `after` of its log."""
        self.wait_until(lambda: marker in self.log_text(after), f"{marker!r} logged", timeout_s)

    def announced_url(self, timeout_s: float = 30) -> str:
        """The URL of the "listening on <url>" line a service started on port 0 prints."""
        found: list[str] = []

        def announced() -> bool:
            # This run's line: a child started again under its name appends to the same log.
            found.extend(_ANNOUNCED.findall(self.log_text(self.log_start))[:1])
            return bool(found)

        self.wait_until(announced, "its port announced", timeout_s)
        return found[0]

    def wait(self, timeout_s: float | None = None) -> int:
        """Until the child exits by itself; its exit code."""
        return self.popen.wait(timeout_s)

    def stop(self, timeout_s: float = 15) -> None:
        """SIGTERM to its process group (a graceful shutdown), SIGKILL after `timeout_s`."""
        self.terminate()
        self.reap(timeout_s)

    def terminate(self) -> None:
        """SIGTERM to its process group: its graceful shutdown begins; `reap` waits for it."""
        if self.popen.poll() is None:
            os.killpg(self.pid, signal.SIGTERM)

    def reap(self, timeout_s: float = 15) -> None:
        """Until the child exits; SIGKILL if it has not after `timeout_s`."""
        try:
            self.popen.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL its process group, as a crash would."""
        if self.popen.poll() is None:
            os.killpg(self.pid, signal.SIGKILL)
        self.popen.wait()


class Processes:
    """The children of one owner (a stack, a benchmark, a test fixture), by name, with their
    logs in one directory; a context manager that stops them all, newest first, on exit."""

    def __init__(self, log_dir: Path | None = None) -> None:
        self.log_dir = log_dir or Path(tempfile.mkdtemp(prefix="taskyard-procs-"))
        self.children: dict[str, Child] = {}  # the running ones, in start order

    def __enter__(self) -> Processes:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop_all()

    def __getitem__(self, name: str) -> Child:
        return self.children[name]

    def log_path(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    def start(
        self,
        name: str,
        argv: list[str],
        env: Mapping[str, str] | None = None,
        cwd: Path = ROOT,
    ) -> Child:
        """Start `argv` as child `name`; `env` is its whole environment (default: ours). Its
        stdout and stderr are appended to its log, so a restart keeps what came before."""
        if name in self.children:
            raise ValueError(f"{name} is started already")  # its child would be lost
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_path(name)
        start = len(log.read_text(errors="replace")) if log.exists() else 0
        with log.open("ab") as out:  # the child holds its own copy of the descriptor
            popen = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out,
                                     stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        child = Child(name, argv, log, popen, start)
        self.children[name] = child
        return child

    def stop(self, name: str, timeout_s: float = 15) -> None:
        """Stop one child gracefully (see `Child.stop`) and forget it."""
        self.children.pop(name).stop(timeout_s)

    def stop_together(self, names: Sequence[str], timeout_s: float = 15) -> None:
        """Stop several children gracefully and forget them: all are sent SIGTERM before any
        is waited for, so their shutdowns overlap instead of adding up."""
        children = [self.children.pop(name) for name in names]
        for child in children:
            child.terminate()
        for child in children:
            child.reap(timeout_s)

    def kill(self, name: str) -> None:
        """SIGKILL one child and forget it."""
        self.children.pop(name).kill()

    def stop_all(self, timeout_s: float = 15) -> None:
        """Stop every child still running, newest first."""
        for name in reversed(list(self.children)):
            self.stop(name, timeout_s)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.TransportError:
        return False
