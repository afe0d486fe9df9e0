"""One session's sandbox over any kernel channel: timeouts, cancels, interrupts and restarts.

The rules, the same for every backend:

- each call carries a fresh nonce (`kernel_call`); a reply that does not quote the call's id
  and nonce, or is too long, is a broken kernel: it is stopped and the result says state was
  lost;
- a cell that outlives its timeout, or is cancelled from another thread, is interrupted: the
  kernel stops every process the session's cells started and sends the cell SIGINT. If it
  answers within a short grace, the session keeps its state and the result says why it ended;
- if it does not answer, the kernel is removed at once, the result says state was lost, and
  the next call starts a fresh kernel (from the warm pool when there is one);
- a kernel that died (the cell exited the process, ran out of memory, or it died between
  calls), expired or was evicted is replaced on the next call, and the first result after
  the loss says so, once;
- file requests (a write, a read, a listing of the working directory) take turns with cells
  under the same lock and are answered by the kernel's supervisor. A write starts a kernel if
  the session has none; a read or a listing never does (`NoLiveSandbox`). A file request
  unanswered within `FILE_TIMEOUT_S`, or answered wrongly, stops the kernel like a broken
  reply to a cell.

Each wait is bounded by the call's own deadline, whatever the kernel sends or withholds and
however loaded the machine is: a call's deadline covers its wait for the session (a call
still running there) and its cell, though not the start of a kernel where the session has
none; a kernel that dies or is given up costs its call at most `EXIT_REASON_S` more, to say
why, and is removed in the background (an engine under load takes seconds to remove a
container, and the call has nothing left to learn from it).
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from taskyard.files.info import FileInfo, FileListing
from taskyard.sandbox.base import DisplayOutput, ExecutionResult
from taskyard.sandbox.channel import KernelChannel, SharedKernel
from taskyard.sandbox.errors import (
    FileRefused,
    KernelGone,
    KernelProtocolError,
    NoLiveSandbox,
    SandboxBusy,
    SandboxClosed,
)
from taskyard.sandbox.kernel_call import KernelCall, within
from taskyard.sandbox.outputs import (
    file_chunk,
    file_info,
    file_listing,
    files_copied,
    parse_display,
    refusal,
)

__all__ = ["EXIT_REASON_S", "FILE_TIMEOUT_S", "INTERRUPT_GRACE_S", "KernelSandbox"]

INTERRUPT_GRACE_S = 2.0
FILE_TIMEOUT_S = 30.0  # a whole file request is disk work in a tmpfs: far less, unless stuck
EXIT_REASON_S = 1.0  # what a dying kernel's call waits to learn why it died (exit code, OOM)


class KernelSandbox:
    """A `CodeSandbox`: one session's kernel, started on first use, one cell at a time."""

    def __init__(
        self,
        start: Callable[[], KernelChannel],
        interrupt_grace_s: float = INTERRUPT_GRACE_S,
        lost_reason: str | None = None,
    ) -> None:
        self._start = start
        self._grace = interrupt_grace_s
        # Reentrant: a fork holds the session (`exclusive`) across the cells and file requests
        # of its copy, each of which takes it too.
        self._lock = threading.RLock()
        self._channel: KernelChannel | None = None
        self._starting = False
        # What `cancel` reads from other threads, under its own small lock.
        self._cancel_lock = threading.Lock()
        self._busy = False  # a `run` holds the session
        self._call: KernelCall | None = None  # its cell, once sent
        self._cancel_pending = False  # cancelled before the cell was sent
        self._has_state = False  # the current kernel has run a cell, so losing it loses state
        self._loss_pending = lost_reason is not None  # a loss the caller was not told about
        self._loss_reason = lost_reason
        self._ids = itertools.count(1)
        self._last_used = time.monotonic()
        self._closed = False

    def run(self, code: str, timeout: float) -> ExecutionResult:
        """Run one cell in the session's kernel; never raises for anything the code does.

        Returns within `timeout` and the interrupt grace (plus a kernel's start): a call of
        the session still running past `timeout` makes this one time out without running.
        Raises `SandboxUnavailable` when no kernel can be started (engine down, image
        missing), `SandboxLimitReached` when no room can be made for one, and
        `SandboxClosed` after `close`.
        """
        return self._request({"code": code}, timeout)

    def hand_over(self, target: KernelSandbox, timeout: float) -> ExecutionResult | None:
        """Save this session's interpreter for `target`, inside their kernel, when one serves
        both (a fork server's: a sealed snapshot in memory, never on disk, which `target`'s
        kernel then loads on its own, its next call waiting for that); None, with nothing run,
        when they are apart. Starts `target`'s kernel where it could be beside this session's;
        a cell's result otherwise, as `run` gives it (and raises)."""
        key = target.key_beside(self) if isinstance(self._channel, SharedKernel) else None
        if key is None:
            return None
        return self._request({"snapshot_to": key}, timeout)

    def holds_state(self) -> None:
        """Its kernel holds state no cell of this session put there (a fork's snapshot): a
        loss of that kernel is said as any loss of state is."""
        with self._lock:
            self._has_state = True

    def key_beside(self, other: KernelSandbox) -> str | None:
        """This session's key in `other`'s kernel when one kernel serves both, else None;
        starts this session's kernel. Raises what `write_file` raises."""
        with self._file_requests(start=True):
            here, there = self._channel, other._channel
            return there.key_beside(here) if isinstance(there, SharedKernel) and here else None

    def _request(self, message: dict[str, Any], timeout: float) -> ExecutionResult:
        deadline = time.monotonic() + timeout
        if not self._lock.acquire(timeout=max(0.0, timeout)):
            return ExecutionResult(
                error=f"Timed out after {timeout:g}s waiting for this session's previous call "
                "to end; this cell did not run.",
                timed_out=True,
            )
        try:
            if self._closed:
                raise SandboxClosed("this session's sandbox was released; call provider.get again")
            with self._cancel_lock:
                self._busy, self._cancel_pending = True, False
            try:
                return self._run_locked(message, timeout, deadline)
            finally:
                with self._cancel_lock:
                    self._busy, self._call = False, None
                self._last_used = time.monotonic()
        finally:
            self._lock.release()

    def cancel(self) -> bool:
        """Interrupt the running cell from another thread; False when no `run` is under way.

        Returns at once. The cell's `run` then ends within the interrupt grace: with the
        state kept and every process the cells started stopped, or, when the kernel does not
        stop, with a fresh kernel and state lost. A `run` still starting its kernel returns
        as soon as the kernel is up, without running the cell.
        """
        with self._cancel_lock:
            if not self._busy:
                return False
            call = self._call
            if call is None:
                self._cancel_pending = True
                return True
        call.interrupt(cancel=True, grace=self._grace)
        return True

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the session: no other thread's cell or file request runs meanwhile, while this
        thread's do. Raises `SandboxBusy` at once if a cell runs now (a fork must not wait for
        one), or if the session is not free within FILE_TIMEOUT_S (a cell that started just
        after that check is waited for: the fork then copies the state after it)."""
        if self._busy:
            raise SandboxBusy("a cell runs in the session")
        if not self._lock.acquire(timeout=FILE_TIMEOUT_S):
            raise SandboxBusy(f"the session's call still ran after {FILE_TIMEOUT_S:g}s")
        try:
            yield
        finally:
            self._lock.release()

    @property
    def cell_running(self) -> bool:
        """Whether a cell has been sent to the kernel and has not answered yet."""
        return self._call is not None

    @property
    def has_kernel(self) -> bool:
        """Whether a kernel runs (or is starting) for this session."""
        return self._starting or self._channel is not None

    @property
    def has_state(self) -> bool:
        return self._has_state

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

    def evict_if_idle(self, reason: str) -> KernelChannel | None:
        """Take the kernel away if no cell runs; the caller closes it. The session stays
        usable: its next call starts a fresh kernel and says state was lost, and why.

        Non-blocking, like `retire_if_idle`.
        """
        if not self._lock.acquire(blocking=False):
            return None
        try:
            channel, self._channel = self._channel, None
            if channel is not None and self._has_state:
                self._loss_pending, self._loss_reason = True, reason
            self._has_state = False
            return channel
        finally:
            self._lock.release()

    def detach_if_idle(self) -> KernelChannel | None:
        """Refuse further calls and hand the kernel over, running and with its state, if no
        cell runs and it has state (the caller passes it on, e.g. to another worker); else
        None, and the session is left as it was. Non-blocking, like `retire_if_idle`."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            if self._closed or self._channel is None or not self._has_state:
                return None
            channel, self._channel = self._channel, None
            self._closed, self._has_state = True, False
            return channel
        finally:
            self._lock.release()

    def adopt(self, channel: KernelChannel) -> None:
        """Take a running kernel that holds this session's state (it ran the session's cells
        elsewhere): it answers the next call, and losing it now loses state."""
        with self._lock:
            if self._channel is not None:
                raise RuntimeError("this session already has a kernel")
            self._channel, self._has_state = channel, True

    def write_file(self, path: str, data: bytes) -> FileInfo:
        """Put `data` at `path` in the working directory, replacing a file there (atomically);
        the kernel starts if the session has none. Raises `FileRefused` (a path that leaves
        the working directory or runs through a link, a full disk) and what `run` raises."""
        encoded = base64.b64encode(data).decode()
        with self._file_requests(start=True) as ask:
            reply = ask({"file_op": "write", "path": path, "data": encoded})
            info = file_info(reply.get("file"), path)
            self._has_state = True  # losing this kernel now loses the file
            return info

    def read_file(self, path: str, limit: int) -> bytes:
        """The regular file at `path`, if it is at most `limit` bytes (else `FileRefused`
        "too_large"). Raises `NoLiveSandbox` when no kernel runs: nothing to read."""
        with self._file_requests(start=False) as ask:
            data = bytearray()
            while True:
                request = {"file_op": "read", "path": path, "offset": len(data)}
                chunk, size = file_chunk(ask(request))
                if size > limit:
                    raise FileRefused("too_large", f"{path} is {size} bytes, over {limit}")
                data += chunk
                if not chunk or len(data) >= size:
                    return bytes(data[:size])

    def list_files(self) -> FileListing:
        """The working directory's regular files; `NoLiveSandbox` when no kernel runs."""
        with self._file_requests(start=False) as ask:
            return file_listing(ask({"file_op": "list"}))

    def copy_files_from(self, source: KernelSandbox) -> tuple[int, bool] | None:
        """Copy `source`'s working directory into this session's inside their kernel, when one
        kernel serves both (a fork server's): (files copied, whether some were left out), or
        None when they are apart (copy through `read_file` and `write_file` then). Starts
        this session's kernel; raises what `write_file` raises."""
        with self._file_requests(start=True) as ask:
            here, there = self._channel, source._channel
            key = here.key_beside(there) if isinstance(here, SharedKernel) and there else None
            if key is None:
                return None
            copied = files_copied(ask({"file_op": "copy_from", "from": key}))
            self._has_state = True  # losing this kernel now loses the files
            return copied

    @contextlib.contextmanager
    def _file_requests(self, start: bool) -> Iterator[Callable[[dict[str, Any]], dict[str, Any]]]:
        """Under the session's lock (waited for at most FILE_TIMEOUT_S: else `SandboxBusy`), a
        function that sends one file request and returns its checked reply, all of them within
        FILE_TIMEOUT_S. A kernel that does not answer in time, or answers wrongly, is stopped."""
        if not self._lock.acquire(timeout=FILE_TIMEOUT_S):
            raise SandboxBusy(f"the session's call still ran after {FILE_TIMEOUT_S:g}s")
        try:
            if self._closed:
                raise SandboxClosed("this session's sandbox was released; call provider.get again")
            channel = self._live_channel() if start else self._running_channel()
            deadline = time.monotonic() + FILE_TIMEOUT_S
            try:
                yield lambda message: self._file_reply(channel, message, deadline)
            except KernelProtocolError as bad:
                self._drop_kernel()
                raise KernelProtocolError(
                    f"the sandbox broke its protocol ({bad}); its interpreter was stopped"
                ) from bad
            except KernelGone:
                self._drop_kernel()
                raise
            finally:
                self._last_used = time.monotonic()
        finally:
            self._lock.release()

    def _file_reply(
        self, channel: KernelChannel, message: dict[str, Any], deadline: float
    ) -> dict[str, Any]:
        call = KernelCall(channel, next(self._ids))
        call.send(message, deadline)
        reply = channel.receive(deadline)
        if reply is None:
            raise KernelGone(f"the sandbox did not answer a file request in {FILE_TIMEOUT_S:g}s")
        refused = refusal(call.check(reply))
        if refused is not None:
            raise refused
        return reply

    def _running_channel(self) -> KernelChannel:
        """The current kernel if it runs; `NoLiveSandbox` otherwise (a dead one is dropped)."""
        if self._channel is not None and not self._channel.alive():
            self._drop_kernel()
        if self._channel is None:
            raise NoLiveSandbox("the session has no running sandbox, so no files")
        return self._channel

    def close(self) -> None:
        """Stop the kernel and refuse further calls; waits for a running cell's call first."""
        with self._lock:
            self._closed = True
            self._drop_kernel(wait=True)

    def _run_locked(
        self, message: dict[str, Any], timeout: float, deadline: float
    ) -> ExecutionResult:
        starting = time.monotonic()
        call = KernelCall(self._live_channel(), next(self._ids))
        deadline += time.monotonic() - starting  # a kernel's start is not the cell's time
        with self._cancel_lock:
            if self._cancel_pending:
                result = self._result({"error": "Cancelled before the cell started: nothing ran."})
                result.cancelled = True
                return result
            self._call = call
        try:
            call.send(message, deadline)
            self._has_state = True
            reply = call.reply_by(deadline, self._grace)
            display = parse_display(reply.get("display")) if reply is not None else []
        except KernelProtocolError as bad:
            return self._lost(
                f"The sandbox broke its protocol ({bad}); its interpreter was stopped"
            )
        except KernelGone as gone:
            reason = within(EXIT_REASON_S, call.channel.exit_reason) or str(gone)
            return self._lost(f"The Python interpreter died while running this cell ({reason})")
        if reply is None:
            what = "Cancelled" if call.cancelled else f"Timed out after {timeout:g}s"
            lost = self._lost(f"{what}, and the interpreter did not stop when interrupted")
            lost.timed_out, lost.cancelled = not call.cancelled, call.cancelled
            return lost
        return self._outcome(call, reply, timeout, display)

    def _live_channel(self) -> KernelChannel:
        """The current kernel, or a new one if there is none or it died since the last call."""
        if self._channel is not None and not self._channel.alive():
            self._drop_kernel()
        if self._channel is None:
            self._starting = True
            try:
                self._channel = self._start()
            finally:
                self._starting = False
            self._has_state = False
        return self._channel

    def _outcome(
        self, call: KernelCall, reply: dict[str, Any], timeout: float, display: list[DisplayOutput]
    ) -> ExecutionResult:
        result = self._result(reply)
        result.display = display
        if not reply.get("interrupted"):
            return result  # it finished on its own, perhaps just as the interrupt went out
        kept = (
            "and every process the session's cells started was stopped. Session state from "
            "before the cell is kept."
        )
        if call.cancelled:
            result.error = f"Cancelled: the cell was interrupted from outside, {kept}"
            result.cancelled = True
        else:
            result.error = f"Timed out after {timeout:g}s: the cell was interrupted, {kept}"
            result.timed_out = True
        return result

    def _lost(self, what: str) -> ExecutionResult:
        """A result for a kernel that had to go; the loss is told right here."""
        self._drop_kernel()
        self._take_loss()
        return ExecutionResult(
            error=f"{what}. It will be restarted on the next call; all session state "
            "(variables, imports) was lost.",
            state_lost=True,
        )

    def _drop_kernel(self, wait: bool = False) -> None:
        """Forget the kernel and stop it; unless `wait`, its removal goes on in the background,
        so that a call never waits on an engine under load."""
        if self._channel is None:
            return
        if wait:
            self._channel.close()
        else:
            threading.Thread(target=self._channel.close, name="sandbox-drop", daemon=True).start()
        self._channel = None
        if self._has_state:
            self._loss_pending, self._loss_reason = True, None
        self._has_state = False

    def _take_loss(self) -> tuple[bool, str | None]:
        lost, reason = self._loss_pending, self._loss_reason
        self._loss_pending, self._loss_reason = False, None
        return lost, reason

    def _result(self, reply: dict[str, Any]) -> ExecutionResult:
        lost, reason = self._take_loss()
        return ExecutionResult(
            stdout=reply.get("stdout") or "",
            stderr=reply.get("stderr") or "",
            result=reply.get("result"),
            error=reply.get("error"),
            state_lost=lost,
            state_lost_reason=reason,
        )
