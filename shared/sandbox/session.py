"""One session's sandbox over any kernel channel: timeouts, interrupts and restarts.

The rules, the same for every backend:

- a cell that outlives its timeout is interrupted (SIGINT); if the kernel answers within a
  short grace, the session keeps its state and the result says it timed out;
- if it does not answer, the kernel is removed at once, the result says state was lost, and
  the next call starts a fresh kernel (from the warm pool when there is one);
- a kernel that died (the cell exited the process, ran out of memory, or it died between
  calls) is replaced on the next call, and the first result after the loss says so, once.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

from shared.sandbox.base import ExecutionResult
from shared.sandbox.channel import KernelChannel
from shared.sandbox.errors import KernelGone, SandboxClosed

__all__ = ["INTERRUPT_GRACE_S", "KernelSandbox"]

INTERRUPT_GRACE_S = 2.0
_INTERRUPTED = "KeyboardInterrupt / timed out"  # what kernel.py answers to SIGINT


class KernelSandbox:
    """A `CodeSandbox`: one session's kernel, started on first use, one cell at a time."""

    def __init__(
        self,
        start: Callable[[], KernelChannel],
        interrupt_grace_s: float = INTERRUPT_GRACE_S,
    ) -> None:
        self._start = start
        self._grace = interrupt_grace_s
        self._lock = threading.Lock()
        self._channel: KernelChannel | None = None
        self._has_state = False  # the current kernel has run a cell, so losing it loses state
        self._loss_pending = False  # a loss the caller has not been told about yet
        self._ids = itertools.count(1)
        self._last_used = time.monotonic()
        self._closed = False

    def run(self, code: str, timeout: float) -> ExecutionResult:
        """Run one cell in the session's kernel; never raises for anything the code does.

        Raises `SandboxUnavailable` when no kernel can be started (engine down, image
        missing) and `SandboxClosed` after `close`.
        """
        with self._lock:
            if self._closed:
                raise SandboxClosed("this session's sandbox was released; call provider.get again")
            try:
                return self._run_locked(code, timeout)
            finally:
                self._last_used = time.monotonic()

    def idle_for(self) -> float:
        """Seconds since the last call ended (or since creation)."""
        return time.monotonic() - self._last_used

    def retire_if_idle(self, idle_s: float) -> bool:
        """Refuse further calls if idle `idle_s` and no cell runs; True if retired.

        Cheap and non-blocking, so a provider can call it under its own lock; `close`
        then stops the kernel.
        """
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if self._closed or self.idle_for() < idle_s:
                return False
            self._closed = True
            return True
        finally:
            self._lock.release()

    def close(self) -> None:
        """Stop the kernel and refuse further calls; waits for a running cell's call first."""
        with self._lock:
            self._closed = True
            self._drop_kernel()

    def _run_locked(self, code: str, timeout: float) -> ExecutionResult:
        channel = self._live_channel()
        request_id = next(self._ids)
        try:
            channel.send({"id": request_id, "code": code})
            self._has_state = True
            reply = self._reply(channel, request_id, timeout)
            if reply is None:
                return self._interrupt(channel, request_id, timeout)
        except KernelGone as gone:
            return self._died(channel, gone)
        return self._result(reply, state_lost=self._take_loss())

    def _live_channel(self) -> KernelChannel:
        """The current kernel, or a new one if there is none or it died since the last call."""
        if self._channel is not None and not self._channel.alive():
            self._drop_kernel()
        if self._channel is None:
            self._channel = self._start()
            self._has_state = False
        return self._channel

    def _reply(
        self, channel: KernelChannel, request_id: int, timeout: float
    ) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            reply = channel.receive(left)
            # A reply to an earlier, abandoned request is skipped, never taken for this one.
            if reply is None or reply.get("id") == request_id:
                return reply
        return None

    def _interrupt(
        self, channel: KernelChannel, request_id: int, timeout: float
    ) -> ExecutionResult:
        try:
            channel.interrupt()
            reply = self._reply(channel, request_id, self._grace)
        except KernelGone:
            reply = None
        if reply is None:
            self._drop_kernel()
            self._take_loss()  # told right here
            return ExecutionResult(
                error=f"Timed out after {timeout:g}s, and the interpreter did not stop when "
                "interrupted: it was restarted and all session state (variables, imports) "
                "was lost.",
                timed_out=True,
                state_lost=True,
            )
        if reply.get("error") != _INTERRUPTED:
            # The cell finished just as the timeout fired: its result is a normal one.
            return self._result(reply, state_lost=self._take_loss())
        result = self._result(reply, state_lost=self._take_loss())
        result.error = (
            f"Timed out after {timeout:g}s: the cell was interrupted (KeyboardInterrupt). "
            "Session state from before the cell is kept."
        )
        result.timed_out = True
        return result

    def _died(self, channel: KernelChannel, gone: KernelGone) -> ExecutionResult:
        reason = channel.exit_reason() or str(gone)
        self._drop_kernel()
        self._take_loss()  # told right here
        return ExecutionResult(
            error=f"The Python interpreter died while running this cell ({reason}). "
            "It will be restarted on the next call; all session state (variables, imports) "
            "was lost.",
            state_lost=True,
        )

    def _drop_kernel(self) -> None:
        if self._channel is None:
            return
        self._channel.close()
        self._channel = None
        self._loss_pending = self._loss_pending or self._has_state
        self._has_state = False

    def _take_loss(self) -> bool:
        lost, self._loss_pending = self._loss_pending, False
        return lost

    @staticmethod
    def _result(reply: dict[str, Any], state_lost: bool) -> ExecutionResult:
        return ExecutionResult(
            stdout=reply.get("stdout") or "",
            stderr=reply.get("stderr") or "",
            result=reply.get("result"),
            error=reply.get("error"),
            state_lost=state_lost,
        )
