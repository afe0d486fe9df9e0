"""Child processes for the benchmark: start them, wait until they answer, stop them all.

Every child gets its own session (process group) and is stopped by its own id at the end, so a
benchmark that fails half-way leaves nothing running.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

import httpx

__all__ = ["ROOT", "ChildFailed", "Processes", "free_port", "python"]

ROOT = Path(__file__).resolve().parents[1]


class ChildFailed(RuntimeError):
    """A child process exited, or did not get ready in time; the message quotes its log."""


def python() -> str:
    """The interpreter of the project's virtualenv (the one running this benchmark)."""
    return sys.executable


def free_port() -> int:
    """A loopback port free right now (a small race with other programs is accepted)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Processes:
    """The benchmark's children; a context manager that stops them all on exit."""

    def __init__(self) -> None:
        self._children: list[tuple[str, subprocess.Popen[bytes]]] = []
        self._logs = Path(tempfile.mkdtemp(prefix="taskyard-bench-"))

    def __enter__(self) -> Processes:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop_all()

    def start(
        self, name: str, argv: list[str], env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """Start a child with its output in a log file (read back when it fails)."""
        log = (self._logs / f"{name}.log").open("wb")
        child = subprocess.Popen(
            argv,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=log,
            start_new_session=True,
        )
        log.close()
        self._children.append((name, child))
        return child

    def start_scripted(self, name: str, flags: list[str]) -> str:
        """A scripted model replica on a free port; returns its root URL."""
        argv = [python(), "-m", "services.scripted_model", "--port", "0", *flags]
        return self.start_listening(name, argv)

    def start_listening(self, name: str, argv: list[str]) -> str:
        """A child that prints "listening on <url>" first; returns the URL."""
        child = self.start(name, argv)
        line = self._read_line(name, child, timeout_s=30.0)
        return line.removeprefix("listening on ").strip()

    def wait_http(self, name: str, url: str, timeout_s: float) -> None:
        """Poll `url` until it answers 200; fail early if the child exits."""
        child = self._child(name)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if child.poll() is not None:
                raise ChildFailed(f"{name} exited ({child.returncode}):\n{self.log_tail(name)}")
            try:
                if httpx.get(url, timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise ChildFailed(f"{name} not ready after {timeout_s:.0f} s:\n{self.log_tail(name)}")

    def stop(self, name: str) -> None:
        """Stop one child (its whole process group) by its id."""
        for index, (child_name, child) in enumerate(self._children):
            if child_name == name:
                _terminate(child)
                del self._children[index]
                return

    def stop_all(self) -> None:
        """Stop every child still running, newest first."""
        while self._children:
            _, child = self._children.pop()
            _terminate(child)

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self._logs / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def _child(self, name: str) -> subprocess.Popen[bytes]:
        return next(child for child_name, child in self._children if child_name == name)

    def _read_line(self, name: str, child: subprocess.Popen[bytes], timeout_s: float) -> str:
        assert child.stdout is not None
        ready, _, _ = select.select([child.stdout], [], [], timeout_s)
        line = child.stdout.readline().decode() if ready else ""
        if not line:
            raise ChildFailed(f"{name} did not announce its port:\n{self.log_tail(name)}")
        return line


def _terminate(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is None:
        os.killpg(child.pid, signal.SIGTERM)
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    if child.stdout is not None:
        child.stdout.close()
