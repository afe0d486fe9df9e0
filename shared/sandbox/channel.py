"""The link to one running kernel (kernel.py), whatever carries it: a container, a process.

A channel moves JSON lines; what a timeout or a dead kernel means for a session is decided
one level up, in `session.py`, once for every backend.
"""

from __future__ import annotations

import json
import select
from typing import Any, Protocol

from shared.sandbox.errors import KernelGone

__all__ = [
    "KernelChannel",
    "LineBuffer",
    "StartKernel",
    "decode_line",
    "encode",
    "wait_readable",
]


class KernelChannel(Protocol):
    """One started kernel that has said it is ready."""

    def send(self, message: dict[str, Any]) -> None:
        """Write one request; raises `KernelGone` when the kernel cannot take it."""
        ...

    def receive(self, timeout: float) -> dict[str, Any] | None:
        """The next reply, or None when `timeout` passes first; raises `KernelGone` on EOF."""
        ...

    def interrupt(self) -> None:
        """Send SIGINT to the kernel, which stops the running cell and keeps its namespace."""
        ...

    def alive(self) -> bool:
        """Whether the kernel still runs, without waiting."""
        ...

    def exit_reason(self) -> str:
        """Why a gone kernel ended, in words for the model (exit code, out of memory)."""
        ...

    def close(self) -> None:
        """Stop the kernel and free what it holds; safe to call twice."""
        ...


class StartKernel(Protocol):
    """Starts a kernel; `session_key` is None for a warm-pool kernel not yet assigned."""

    def __call__(self, session_key: str | None) -> KernelChannel: ...


class LineBuffer:
    """Bytes in, complete lines out: the kernel's replies arrive in arbitrary chunks."""

    def __init__(self) -> None:
        self._data = bytearray()

    def feed(self, chunk: bytes) -> None:
        self._data += chunk

    def pop_line(self) -> bytes | None:
        end = self._data.find(b"\n")
        if end < 0:
            return None
        line = bytes(self._data[:end])
        del self._data[: end + 1]
        return line


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def decode_line(line: bytes) -> dict[str, Any]:
    """A reply line as a dict; raises `KernelGone` on garbage, which only a broken kernel sends."""
    try:
        message = json.loads(line)
    except ValueError as exc:
        raise KernelGone(f"the kernel sent a malformed line: {line[:200]!r}") from exc
    if not isinstance(message, dict):
        raise KernelGone(f"the kernel sent a non-object line: {line[:200]!r}")
    return message


def wait_readable(fd: int, timeout: float) -> bool:
    """Whether `fd` has data (or EOF) within `timeout` seconds.

    poll, not select: a busy worker holds more than select's 1024 descriptors.
    """
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(max(0.0, timeout) * 1000))
