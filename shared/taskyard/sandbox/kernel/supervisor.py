"""The supervisor: holds the worker's protocol, runs no user code, and owns every process.

One thread, one poll loop over three inputs: requests from the worker (stdin), replies from
the executor (a socket that reports each sender's pid), and a wake-up pipe for SIGCHLD. File
requests (`files.py`) it answers itself, so no user code stands between them and the files.
A cell can write any frame on the executor's socket, so each reply's caps are applied here
(`replies.py`), never trusted from the frame; the reply's id and nonce are the call's own.
Every process a cell starts is below it, and stopped through `processes.py`.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import select
import signal
import socket
import struct
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, NoReturn

from . import INTERRUPTED, MAX_REQUEST_BYTES
from .executor import run_executor
from .files import FileRefused, WorkDir
from .processes import stop_tree
from .replies import Malformed, cell_reply, fit_line
from .seccomp import set_child_subreaper, set_dumpable
from .wire import FrameBuffer, LineBuffer, TooLong, encode_frame, encode_line

__all__ = ["Supervisor", "main"]

_MAX_FRAME_BYTES = 16 << 20  # an honest reply is at most about 5 MB of JSON
_SEND_TIMEOUT_S = 5.0  # an executor that does not take its request in this long is broken
_CREDS = struct.Struct("iII")  # struct ucred: pid, uid, gid
_BROKEN = 70  # exit status when the executor broke its channel
_LONGEST_LEASE_S = 7 * 86400.0


@dataclass
class _Call:
    id: Any
    nonce: Any
    interrupted: bool = False
    started: bool = False  # the executor runs it: a SIGINT now stops the cell
    killed: set[int] = field(default_factory=set)


def _sender(ancillary: list[tuple[int, int, bytes]]) -> int | None:
    """The pid the kernel vouches sent the data (SCM_CREDENTIALS), if it says."""
    for level, kind, payload in ancillary:
        if (level, kind) == (socket.SOL_SOCKET, socket.SCM_CREDENTIALS):
            pid: int = _CREDS.unpack(payload[: _CREDS.size])[0]
            return pid
    return None


class Supervisor:
    """Relays calls to the executor, interrupts and stops it; never runs user code."""

    def __init__(self, proto_in: int, proto_out: int, sock: socket.socket, executor: int) -> None:
        self._in = proto_in
        self._out = proto_out
        self._sock = sock
        self._executor = executor
        self._requests = LineBuffer(MAX_REQUEST_BYTES)
        self._frames = FrameBuffer(_MAX_FRAME_BYTES)
        self._call: _Call | None = None
        self._wakeup = self._watch_children()
        self._files = WorkDir()
        self._lease_s: float | None = None  # once given, a worker silent this long is gone
        self._lease_ends = 0.0

    def serve(self) -> NoReturn:
        self._await_ready()
        _write_all(self._out, encode_line({"ready": True}))
        poller = select.poll()
        for fd in (self._in, self._sock.fileno(), self._wakeup):
            poller.register(fd, select.POLLIN)
        while True:
            for fd, _ in poller.poll(1000):  # the timeout is a backstop for reaping
                if fd == self._in:
                    self._read_requests()
                elif fd == self._wakeup:
                    os.read(self._wakeup, 512)
                else:
                    self._read_executor()
            self._reap()
            self._check_lease()

    @staticmethod
    def _watch_children() -> int:
        """A pipe that becomes readable on SIGCHLD, so the poll loop reaps at once."""
        read, write = os.pipe()
        os.set_blocking(write, False)
        signal.set_wakeup_fd(write)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        return read

    def _await_ready(self) -> None:
        frame = None
        while frame is None:
            self._receive_from_executor(starting=True)
            frame = self._pop_frame()
        if not frame.get("ready"):
            self._fail(str(frame.get("fatal") or f"unexpected first frame {frame!r}"))

    def _read_requests(self) -> None:
        chunk = os.read(self._in, 1 << 16)
        if not chunk:
            self._stop(0)  # the worker is gone: so is everything here, mid-cell or not
        self._heard()
        try:
            self._requests.feed(chunk)
            while (line := self._requests.pop_line()) is not None:
                if line.strip():
                    self._handle(line)
        except TooLong as exc:
            self._fail(f"request too long: {exc}")

    def _handle(self, line: bytes) -> None:
        try:
            request = json.loads(line)
            if "lease" in request:
                self._renew(float(request["lease"]))
            elif "interrupt" in request:
                self._interrupt(request["interrupt"])
            elif "file_op" in request:
                self._answer({"id": request["id"], "nonce": request.get("nonce"),
                              **self._file_op(request)})  # fmt: skip
            else:
                self._start_call(request["id"], request.get("nonce"), str(request["code"]))
        except (ValueError, KeyError, TypeError) as exc:
            self._answer({"id": None, "nonce": None, "error": f"bad request: {exc!r}"})

    def _renew(self, seconds: float) -> None:
        """The worker vouches for itself `seconds` longer, and again with each line it sends.
        Where its attach can close without closing stdin (a container handed from one worker
        to the next), its silence is how the kernel learns that nobody holds it any more."""
        if 0 <= seconds <= _LONGEST_LEASE_S:
            self._lease_s = seconds
            self._heard()

    def _heard(self) -> None:
        if self._lease_s is not None:
            self._lease_ends = time.monotonic() + self._lease_s

    def _check_lease(self) -> None:
        if self._lease_s is not None and time.monotonic() > self._lease_ends:
            sys.stderr.write("kernel: the worker did not renew its lease\n")
            self._stop(0)

    def _start_call(self, call_id: Any, nonce: Any, code: str) -> None:
        if self._call is not None:
            self._answer({"id": call_id, "nonce": nonce, "error": "busy: one call at a time"})
            return
        self._call = _Call(call_id, nonce)
        self._send_executor({"code": code})

    def _file_op(self, request: dict[str, Any]) -> dict[str, Any]:
        """A file request's answer (never user code's: the executor takes no part)."""
        op, path = request["file_op"], request.get("path")
        try:
            if op == "write":
                return {"file": self._files.write(path, _decoded(request.get("data")))}
            if op == "read":
                data, st = self._files.read(path, int(request.get("offset", 0)))
                return {"data": base64.b64encode(data).decode(), "size": st.st_size}
            if op == "list":
                files, truncated = self._files.listing()
                return {"files": files, "truncated": truncated}
        except FileRefused as refused:
            return {"refused": refused.reason, "error": str(refused)}
        return {"refused": "invalid", "error": f"unknown file_op {op!r}"}

    def _send_executor(self, message: dict[str, Any]) -> None:
        try:
            self._sock.sendall(encode_frame(message))
        except OSError:  # a timeout too: it has not read for _SEND_TIMEOUT_S
            self._fail("the interpreter stopped taking requests")

    def _interrupt(self, call_id: Any) -> None:
        call = self._call
        if call is None or call.id != call_id or call.interrupted:
            return  # that call already ended: a late interrupt must not hit the next one
        call.interrupted = True
        call.killed |= stop_tree(keep=self._executor)
        if call.started:
            self._sigint()

    def _sigint(self) -> None:
        with contextlib.suppress(ProcessLookupError):  # it died; the reap says how
            os.kill(self._executor, signal.SIGINT)

    def _read_executor(self) -> None:
        self._receive_from_executor()
        while (frame := self._pop_frame()) is not None:
            self._on_frame(frame)

    def _receive_from_executor(self, starting: bool = False) -> None:
        try:
            data, ancillary, _, _ = self._sock.recvmsg(1 << 16, socket.CMSG_SPACE(_CREDS.size))
        except (BlockingIOError, TimeoutError):
            return
        if not data:
            if starting:
                sys.stderr.write("kernel: the interpreter ended before it was ready\n")
            self._executor_gone()
        sender = _sender(ancillary)
        if sender == self._executor:  # anything a forked process wrote is dropped
            self._frames.feed(data)

    def _pop_frame(self) -> dict[str, Any] | None:
        try:
            return self._frames.pop_frame()
        except (TooLong, ValueError, RecursionError) as exc:  # RecursionError: nested too deep
            self._fail(f"the interpreter sent a malformed reply ({type(exc).__name__}: {exc})")

    def _on_frame(self, frame: dict[str, Any]) -> None:
        call = self._call
        if call is None:
            return  # nobody asked: user code wrote to the executor's own socket
        if frame.get("started"):
            call.started = True
            if call.interrupted:
                self._sigint()  # the interrupt came before the cell could catch it
            return
        if not call.started:
            # Sent before the executor took this call: the real reply of a cell that forged
            # an earlier one for itself. It must not pass for this call's.
            return
        self._call = None
        if call.interrupted:
            call.killed |= stop_tree(keep=self._executor)  # what the cell started meanwhile
            if call.killed:
                self._send_executor({"reap": sorted(call.killed)})
        try:
            reply = cell_reply(frame)  # the caps, here where no cell can write
        except Malformed as exc:
            self._fail(f"the interpreter sent a malformed reply ({exc})")
        interrupted = call.interrupted and reply["error"] == INTERRUPTED
        self._answer({"id": call.id, "nonce": call.nonce, **reply, "interrupted": interrupted})

    def _answer(self, reply: dict[str, Any]) -> None:
        _write_all(self._out, fit_line(reply))

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self._executor:
                self._exit_like(status)

    def _executor_gone(self) -> NoReturn:
        """The executor's end of the socket closed: it died, or user code closed it."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self._executor, signal.SIGKILL)
        try:
            _, status = os.waitpid(self._executor, 0)
        except ChildProcessError:  # already reaped: its status was handled there
            self._stop(_BROKEN)
        else:
            self._exit_like(status)

    def _exit_like(self, status: int) -> NoReturn:
        code = os.waitstatus_to_exitcode(status)
        self._stop(code if code >= 0 else 128 - code)

    def _fail(self, reason: str) -> NoReturn:
        sys.stderr.write(f"kernel: {reason}\n")
        sys.stderr.flush()
        self._stop(_BROKEN)

    def _stop(self, code: int) -> NoReturn:
        stop_tree(keep=0)
        os._exit(code)


def _decoded(data: Any) -> bytes:
    try:
        return base64.b64decode(str(data), validate=True)
    except (binascii.Error, ValueError):
        raise FileRefused("invalid", "the file's data is not base64") from None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _take_protocol_fds() -> tuple[int, int]:
    """Private copies of stdin/stdout for the protocol; fds 0 and 1 become /dev/null."""
    proto_in, proto_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    return proto_in, proto_out


def _run_child(sock: socket.socket) -> NoReturn:
    code = 0
    try:
        run_executor(sock)
    except BaseException:
        traceback.print_exc()
        code = _BROKEN
    os._exit(code)


def main() -> None:
    """Start the executor and serve the worker until stdin ends."""
    proto_in, proto_out = _take_protocol_fds()
    set_dumpable(False)  # same-uid processes can no longer open our fds or read our memory
    if os.getpid() != 1:
        set_child_subreaper()  # orphans of the cells come to us, so we can stop them
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    ours, theirs = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    executor = os.fork()
    if executor == 0:
        ours.close()
        os.close(proto_in)
        os.close(proto_out)
        _run_child(theirs)
    theirs.close()
    ours.settimeout(_SEND_TIMEOUT_S)
    Supervisor(proto_in, proto_out, ours, executor).serve()
