"""One session's executor as the supervisor sees it: its socket, its pid, the call it runs and
its working directory.

A cell can write any frame on the executor's socket, so each reply's caps are applied here
(`replies.py`), never trusted from the frame; the reply's id and nonce are the call's own, and
only data the kernel vouches the executor sent (SCM_CREDENTIALS) is read. A descriptor the
executor sends (SCM_RIGHTS) is kept only while a hand-over call runs (a live fork's snapshot
and its writer's pipe, `handover.py`), two per call; every other is closed as it arrives. A
session loading a snapshot (a call of the supervisor's own) holds the worker's next call
until it is done, and its source does not stop its processes before the snapshot's writer,
one of them, finished. A slot that breaks its protocol raises `SlotBroken`; the supervisor
decides what that ends (the container, or only this session).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import signal
import socket
import struct
from dataclasses import dataclass, field
from typing import Any

from . import INTERRUPTED
from .files import FileRefused, WorkDir
from .handover import close_all, passed_fds, readable_within, rights_space, send_with_fds
from .processes import inner_pids, stop_tree
from .replies import Malformed, cell_reply
from .wire import FrameBuffer, TooLong, encode_frame

__all__ = ["Handed", "Slot", "SlotBroken", "socket_pair"]

_MAX_FRAME_BYTES = 16 << 20  # an honest reply is at most about 5 MB of JSON
_SEND_TIMEOUT_S = 5.0  # an executor that does not take its request in this long is broken
_CREDS = struct.Struct("iII")  # struct ucred: pid, uid, gid
_HANDED_FDS = 2  # a hand-over's: the snapshot's memfd, its writer's pipe
_WRITER_WAIT_S = 10.0  # for a snapshot's writer: a whole share's copy takes well under that
BROKEN = 70  # exit status when an executor broke its channel


class SlotBroken(Exception):
    """The executor broke its protocol or its channel: the session must end."""

    def __init__(self, reason: str, closed: bool = False) -> None:
        super().__init__(reason)
        self.closed = closed  # the executor's end of the socket closed (it died, most likely)


@dataclass
class _Call:
    id: Any
    nonce: Any
    interrupted: bool = False
    started: bool = False  # the executor runs it: a SIGINT now stops the cell
    killed: set[int] = field(default_factory=set)
    hand_to: Any = None  # a hand-over's call: the session its snapshot goes to
    fds: list[int] = field(default_factory=list)  # what the executor sent during a hand-over
    internal: bool = False  # the supervisor's own (a snapshot's load): nobody waits for it


@dataclass(frozen=True)
class Handed:
    """What a hand-over call's reply brought: the descriptors (as many as came), for whom."""

    to: Any
    fds: tuple[int, ...]


def socket_pair() -> tuple[socket.socket, socket.socket]:
    """(ours, the executor's): ours passes on each sender's credentials from the first byte,
    so it must be set before the other end is handed to anyone (a ready frame sent before
    would come without them and be dropped)."""
    ours, theirs = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    return ours, theirs


def _sender(ancillary: list[tuple[int, int, bytes]]) -> int | None:
    """The pid the kernel vouches sent the data (SCM_CREDENTIALS), if it says."""
    for level, kind, payload in ancillary:
        if (level, kind) == (socket.SOL_SOCKET, socket.SCM_CREDENTIALS):
            pid: int = _CREDS.unpack(payload[: _CREDS.size])[0]
            return pid
    return None


class Slot:
    """A session's executor: relays its calls and file requests, interrupts it."""

    def __init__(self, sock: socket.socket, executor: int | None, own_tree: bool) -> None:
        """`sock`: our end of a `socket_pair`. `executor` None: the first frame's sender is the
        executor (a fork server's child). `own_tree`: the executor is the root of every process
        of the session (the init of its pid namespace), else the supervisor is."""
        sock.settimeout(_SEND_TIMEOUT_S)
        self.sock = sock
        self.executor = executor
        self.ready = False
        self.files: WorkDir | None = None
        self._own_tree = own_tree
        self._frames = FrameBuffer(_MAX_FRAME_BYTES)
        self._call: _Call | None = None
        self._handed: Handed | None = None  # a hand-over's reply, until the supervisor takes it
        self._snapshot: tuple[int, ...] = ()  # a snapshot handed to this session, until it loads
        self.queued: dict[str, Any] | None = None  # the worker's call held while a load runs
        self._writing: int | None = None  # the pipe of a snapshot's writer this session forked

    def fileno(self) -> int:
        return self.sock.fileno()

    @property
    def loading(self) -> bool:
        """Whether the supervisor's own call (a snapshot's load) runs."""
        return self._call is not None and self._call.internal

    def start_call(
        self,
        call_id: Any,
        nonce: Any,
        request: dict[str, Any],
        hand_to: Any = None,
        fds: tuple[int, ...] = (),
        internal: bool = False,
    ) -> dict[str, Any] | None:
        """Send a cell's request to the executor (with the descriptors `fds`); a refusal to
        answer at once, if busy. `hand_to`: the call hands its session's snapshot to that
        session (`take_handed` once it replied). `internal`: the supervisor's own call."""
        if self._call is not None:
            return {"id": call_id, "nonce": nonce, "error": "busy: one call at a time"}
        self._call = _Call(call_id, nonce, hand_to=hand_to, internal=internal)
        self.send(request, fds)
        return None

    def take_handed(self) -> Handed | None:
        """What the hand-over call that just replied brought, now the caller's to close."""
        handed, self._handed = self._handed, None
        return handed

    def give_snapshot(self, fds: tuple[int, ...]) -> None:
        """Keep a snapshot (its memfd, its writer's pipe) for this session to load next."""
        close_all(self._snapshot)
        self._snapshot = fds

    def take_snapshot(self) -> tuple[int, ...]:
        """The snapshot kept for this session, now the caller's to close; () if none."""
        fds, self._snapshot = self._snapshot, ()
        return fds

    def watch_writer(self, done: int) -> None:
        """Keep `done`, a copy of the pipe of a snapshot's writer this session forked, so that
        its processes are not stopped before the writer finished (replacing an older one)."""
        self._await_writer(0.0)
        self._writing = done

    def _await_writer(self, within_s: float = _WRITER_WAIT_S) -> None:
        """Wait (a bounded while) until the writer said it is done or ended."""
        if self._writing is None:
            return
        with contextlib.suppress(OSError):
            readable_within(self._writing, within_s)
        os.close(self._writing)
        self._writing = None

    def file_op(self, request: dict[str, Any]) -> dict[str, Any]:
        """A file request's answer (never user code's: the executor takes no part)."""
        op, path = request["file_op"], request.get("path")
        if self.files is None:
            return {"refused": "invalid", "error": "the session's files are not ready"}
        try:
            if op == "write":
                return {"file": self.files.write(path, _decoded(request.get("data")))}
            if op == "read":
                data, st = self.files.read(path, int(request.get("offset", 0)))
                return {"data": base64.b64encode(data).decode(), "size": st.st_size}
            if op == "list":
                files, truncated = self.files.listing()
                return {"files": files, "truncated": truncated}
        except FileRefused as refused:
            return {"refused": refused.reason, "error": str(refused)}
        return {"refused": "invalid", "error": f"unknown file_op {op!r}"}

    def interrupt(self, call_id: Any) -> None:
        call = self._call
        if call is None or call.id != call_id or call.interrupted:
            return  # that call already ended: a late interrupt must not hit the next one
        call.interrupted = True
        call.killed |= self.stop_cells()
        if call.started:
            self._sigint()

    def stop_cells(self) -> set[int]:
        """SIGKILL every process the session's cells started; the executor stays."""
        if self.executor is None:
            return set()
        self._await_writer()
        return stop_tree(keep=self.executor, root=self.executor if self._own_tree else None)

    def kill(self) -> None:
        """End the session: the executor, and with it (as its pid namespace's init) the rest;
        the descriptors held for it are closed."""
        self._await_writer()
        if self.executor is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.executor, signal.SIGKILL)
        self.sock.close()
        close_all(self.take_snapshot())
        handed, self._handed = self._handed, None
        if handed is not None:
            close_all(handed.fds)
        if self._call is not None:
            close_all(self._call.fds)
            self._call.fds.clear()

    def send(self, message: dict[str, Any], fds: tuple[int, ...] = ()) -> None:
        try:
            if not fds:
                self.sock.sendall(encode_frame(message))
            else:
                send_with_fds(self.sock, encode_frame(message), list(fds))
        except OSError:  # a timeout too: it has not read for _SEND_TIMEOUT_S
            raise SlotBroken("the interpreter stopped taking requests") from None

    def receive(self) -> list[dict[str, Any]]:
        """What the executor sent: the frames (the first one before ready, replies after).
        Raises `SlotBroken` at EOF (the executor's end closed) or on a malformed frame."""
        room = socket.CMSG_SPACE(_CREDS.size) + rights_space()
        try:
            data, ancillary, _, _ = self.sock.recvmsg(1 << 16, room, socket.MSG_CMSG_CLOEXEC)
        except (BlockingIOError, TimeoutError):
            return []
        sender = _sender(ancillary)
        self._keep_fd(passed_fds(ancillary), sender)
        if not data:
            raise SlotBroken("the interpreter's channel closed", closed=True)
        if self.executor is None:
            self.executor = sender  # only the executor holds the other end before it is ready
        if sender == self.executor:  # anything a forked process wrote is dropped
            self._frames.feed(data)
        frames = []
        while (frame := self._pop_frame()) is not None:
            frames.append(frame)
        return frames

    def _keep_fd(self, fds: list[int], sender: int | None) -> None:
        """Keep the first two descriptors the executor sends during a hand-over's call; close
        the rest unread (a cell can send any descriptor on its socket: none reaches anyone)."""
        call = self._call
        ours = sender is not None and sender == self.executor
        if call is not None and call.hand_to is not None and ours:
            room = _HANDED_FDS - len(call.fds)
            call.fds += fds[:room]
            fds = fds[room:]
        for fd in fds:
            os.close(fd)

    def _pop_frame(self) -> dict[str, Any] | None:
        try:
            return self._frames.pop_frame()
        except (TooLong, ValueError, RecursionError) as exc:  # RecursionError: nested too deep
            raise SlotBroken(
                f"the interpreter sent a malformed reply ({type(exc).__name__}: {exc})"
            ) from None

    def on_frame(self, frame: dict[str, Any]) -> dict[str, Any] | None:
        """The reply a frame makes, if any (without the session's key)."""
        call = self._call
        if call is None:
            return None  # nobody asked: user code wrote to the executor's own socket
        if frame.get("started"):
            call.started = True
            if call.interrupted:
                self._sigint()  # the interrupt came before the cell could catch it
            return None
        if not call.started:
            # Sent before the executor took this call: the real reply of a cell that forged
            # an earlier one for itself. It must not pass for this call's.
            return None
        self._call = None
        if call.hand_to is not None:
            self._handed = Handed(call.hand_to, tuple(call.fds))
        if call.interrupted:
            call.killed |= self.stop_cells()  # what the cell started meanwhile
            if call.killed:
                # As the executor names them: a fork server's session has a pid namespace of
                # its own. Only what the interrupt killed is reaped there: any other child's
                # status user code may still wait for (subprocess.Popen.wait), and an orphan
                # the executor adopted as init looks the same as one of those.
                self.send({"reap": inner_pids(sorted(call.killed))})
        try:
            reply = cell_reply(frame)  # the caps, here where no cell can write
        except Malformed as exc:
            raise SlotBroken(f"the interpreter sent a malformed reply ({exc})") from None
        interrupted = call.interrupted and reply["error"] == INTERRUPTED
        reply = {"id": call.id, "nonce": call.nonce, **reply, "interrupted": interrupted}
        return {**reply, "internal": True} if call.internal else reply

    def _sigint(self) -> None:
        if self.executor is not None:
            with contextlib.suppress(ProcessLookupError):  # it died; the reap says how
                os.kill(self.executor, signal.SIGINT)


def _decoded(data: Any) -> bytes:
    try:
        return base64.b64decode(str(data), validate=True)
    except (binascii.Error, ValueError):
        raise FileRefused("invalid", "the file's data is not base64") from None
