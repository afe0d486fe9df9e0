"""The link to one running kernel (kernel/), whatever carries it: a container, a process.

A channel moves JSON lines, bounded in size and time on this side whatever the sandbox sends
or withholds (a request is written within its call's deadline too: a kernel that stops reading
must not hold the worker);
what a timeout or a dead kernel means for a session is decided one level up, in `session.py`,
once for every backend.
"""

from __future__ import annotations

import json
import os
import select
import signal
import time
from typing import Any, Protocol, runtime_checkable

from taskyard.sandbox.errors import KernelGone, KernelProtocolError
from taskyard.sandbox.kernel import MAX_LINE_BYTES
from taskyard.sandbox.kernel.wire import LineBuffer, TooLong, encode_line

__all__ = [
    "MAX_LINE_BYTES",
    "KernelChannel",
    "OutputTail",
    "ReplyLines",
    "SharedKernel",
    "StartKernel",
    "decode_line",
    "describe_exit",
    "encode_line",
    "wait_readable",
    "write_within",
]


class KernelChannel(Protocol):
    """One started kernel that has said it is ready."""

    def send(self, message: dict[str, Any], deadline: float) -> None:
        """Write one request by `deadline`; safe from any thread; raises `KernelGone` if it
        cannot (then the channel is broken: `alive` is False)."""
        ...

    def receive(self, deadline: float) -> dict[str, Any] | None:
        """The next reply, or None once `time.monotonic()` reaches `deadline`.

        Raises `KernelGone` on EOF and `KernelProtocolError` on a line no kernel sends.
        """
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


@runtime_checkable
class SharedKernel(Protocol):
    """A channel to one of several sessions one kernel serves (a fork server's)."""

    def key_beside(self, other: KernelChannel) -> str | None:
        """`other`'s session key in this channel's kernel when it is a session of the same
        kernel, else None."""
        ...


class StartKernel(Protocol):
    """Starts a kernel; `session_key` is None for a warm-pool kernel not yet assigned."""

    def __call__(self, session_key: str | None) -> KernelChannel: ...


class ReplyLines:
    """The kernel's stdout as lines, never more than MAX_LINE_BYTES of one held."""

    def __init__(self) -> None:
        self._lines = LineBuffer(MAX_LINE_BYTES)

    def feed(self, chunk: bytes) -> None:
        try:
            self._lines.feed(chunk)
        except TooLong as exc:
            raise KernelProtocolError(f"the sandbox sent {exc}") from None

    def pop(self) -> dict[str, Any] | None:
        try:
            line = self._lines.pop_line()
        except TooLong as exc:
            raise KernelProtocolError(f"the sandbox sent {exc}") from None
        return None if line is None else decode_line(line)


class OutputTail:
    """The last bytes a kernel wrote to stderr: why it failed, in its own words."""

    def __init__(self, limit: int = 4096) -> None:
        self._data = b""
        self._limit = limit

    def feed(self, chunk: bytes) -> None:
        self._data = (self._data + chunk[-self._limit :])[-self._limit :]

    def text(self) -> str:
        return self._data.decode(errors="replace").strip()

    def last_line(self) -> str:
        lines = self.text().splitlines()
        return lines[-1] if lines else ""


def decode_line(line: bytes) -> dict[str, Any]:
    """A reply line as a dict; `KernelProtocolError` on garbage, which no honest kernel sends."""
    # The line itself is never quoted: it would reach the model.
    try:
        message = json.loads(line)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
        raise KernelProtocolError("the sandbox sent a malformed line") from exc
    if not isinstance(message, dict):
        raise KernelProtocolError("the sandbox sent a line that is not an object")
    return message


def describe_exit(code: int | None) -> str:
    """A kernel's exit status in words; the supervisor exits 128 + N for a signal N."""
    if code is None:
        return ""
    signum = -code if code < 0 else code - 128
    if not 0 < signum < signal.NSIG:
        return f"the process exited with code {code}"
    try:
        return f"killed by {signal.Signals(signum).name}"
    except ValueError:
        return f"killed by signal {signum}"


def write_within(fd: int, data: bytes, deadline: float) -> None:
    """Write all of `data` to the non-blocking `fd` by `deadline`: `KernelGone` if the reader
    is gone, `KernelProtocolError` if it takes too long (part of `data` may then be written)."""
    view = memoryview(data)
    poller = select.poll()
    if fd < 0:  # a socket closed meanwhile says -1
        raise KernelGone("the kernel's channel was closed")
    poller.register(fd, select.POLLOUT)
    while view:
        if not poller.poll(max(0.0, deadline - time.monotonic()) * 1000):
            raise KernelProtocolError(f"it took no request for {len(view)} more bytes in time")
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            continue
        except OSError as exc:
            raise KernelGone(f"cannot write to the kernel: {exc}") from exc


def wait_readable(fd: int, deadline: float) -> bool:
    """Whether `fd` has data (or EOF) before `deadline` (a `time.monotonic()` value).

    poll, not select: a busy worker holds more than select's 1024 descriptors.
    """
    if fd < 0:  # a socket closed meanwhile says -1
        raise KernelGone("the kernel's channel was closed")
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(max(0.0, deadline - time.monotonic()) * 1000))
