"""The supervisor: holds the worker's protocol, runs no user code, and owns every process.

One thread, one poll loop over the worker's requests (stdin), each session's executor socket
(`slot.py`) and a wake-up pipe for SIGCHLD. File requests it answers itself, so no user code
stands between them and the files. Two shapes:

- one session (`python3 -m kernel`): the executor is forked here; the container or namespace
  is the session's, and when the executor ends, everything ends;
- many sessions of one tenant (`python3 -m kernel --sessions N`): a fork server
  (`zygote.py`) forks each session from a pre-imported interpreter and walls it off
  (`isolation.py`); requests and replies name their session, a session that ends is said
  (``{"session": k, "gone": why}``), and the container goes on. One file request is theirs
  alone: ``copy_from`` copies another session's working directory into the session's (a
  fork's files, `files.WorkDir.copy_into`). A live fork's interpreter goes the same way, in
  memory: ``snapshot_to`` takes a session's snapshot into a memfd, written behind the answer
  by a copy-on-write child of the source; the supervisor checks it and keeps it for the other
  session, which loads it (a call of the supervisor's own, which that session's next call
  waits for) once its ``copy_from`` copied the files, or before its next call if none comes;
  it maps the memfd once written and sealed (`handover.py`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import select
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any, NoReturn

from . import INTERRUPTED, MAX_REQUEST_BYTES
from .executor import run_executor
from .files import FileRefused, WorkDir
from .handover import Refused, close_all
from .handover import check as check_handed
from .isolation import SessionLimits
from .memory import MemoryWatch, proportional
from .processes import stop_tree
from .replies import cell_reply, fit_line
from .seccomp import set_child_subreaper, set_dumpable
from .slot import BROKEN, Handed, Slot, SlotBroken, socket_pair
from .spares import Spares
from .wire import LineBuffer, TooLong, encode_line

__all__ = ["Supervisor", "main"]

_LONGEST_LEASE_S = 7 * 86400.0
_EXIT_WAIT_S = 1.0  # for a session's executor to be reapable once its channel closed
SpawnSession = Callable[[socket.socket], None]


class Supervisor:
    """Relays calls to the executors, interrupts and stops them; never runs user code."""

    def __init__(
        self,
        proto_in: int,
        proto_out: int,
        spawn: SpawnSession | None,
        limits: SessionLimits | None = None,
        spares: Spares | None = None,
    ) -> None:
        """`spawn` None: one session, set with `adopt`; else it starts a session's executor
        on the socket it is given (the fork server), keeping `spares` forked ahead."""
        self._in = proto_in
        self._out = proto_out
        self._spawn = spawn
        self._spares = spares or Spares(0, 0)
        self._requests = LineBuffer(MAX_REQUEST_BYTES)
        self._slots: dict[Any, Slot] = {}
        self._keys: dict[int, Any] = {}  # a slot's socket fd -> its session's key
        self._baseline: dict[Any, int] = {}  # a session's resident memory when it was ready
        self._wakeup = self._watch_children()
        self._lease_s: float | None = None  # once given, a worker silent this long is gone
        self._lease_ends = 0.0
        self._memory = None if limits is None else MemoryWatch(limits.memory)
        self._poller = select.poll()

    def adopt(self, slot: Slot) -> None:
        """The one session of a single-session kernel."""
        self._add(None, slot)

    def _add(self, key: Any, slot: Slot) -> None:
        self._slots[key] = slot
        self._keys[slot.fileno()] = key

    def serve(self) -> NoReturn:
        if self._spawn is None:
            self._await_ready(self._slots[None])
        _write_all(self._out, encode_line({"ready": True}))
        for fd in (self._in, self._wakeup):
            self._poller.register(fd, select.POLLIN)
        for fd in self._keys:
            self._poller.register(fd, select.POLLIN)
        while True:
            for fd, _ in self._poller.poll(self._wait_ms()):
                if fd == self._in:
                    self._read_requests()
                elif fd == self._wakeup:
                    os.read(self._wakeup, 512)
                else:
                    self._read_slot(fd)
            self._reap()
            self._check_lease()
            self._check_memory()
            self._fork_spares()

    def _wait_ms(self) -> int:
        """How long to wait for a request or a frame: until the next memory sample, and at
        most a second (a backstop for reaping)."""
        if self._memory is None:
            return 1000
        return math.ceil(min(self._memory.wait_s(), 1.0) * 1000)

    @staticmethod
    def _watch_children() -> int:
        """A pipe that becomes readable on SIGCHLD, so the poll loop reaps at once."""
        read, write = os.pipe()
        os.set_blocking(write, False)
        signal.set_wakeup_fd(write)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        return read

    def _await_ready(self, slot: Slot) -> None:
        frames: list[dict[str, Any]] = []
        try:
            while not frames:
                frames = slot.receive()
        except SlotBroken:
            sys.stderr.write("kernel: the interpreter ended before it was ready\n")
            self._executor_gone(None, slot)
        self._ready(None, slot, frames[0])

    def _ready(self, key: Any, slot: Slot, frame: dict[str, Any]) -> None:
        if not frame.get("ready"):
            self._end_session(key, str(frame.get("fatal") or f"unexpected first frame {frame!r}"))
            return
        slot.ready = True
        if key is None:
            slot.files = WorkDir()
            return
        # The session's /work is a tmpfs of its own mount namespace: reached through its root.
        slot.files = WorkDir(f"/proc/{slot.executor}/root/work")
        self._baseline[key] = _resident(slot.executor)
        if self._spares.owns(key):
            self._spares.ready(key)
        else:
            self._answer(key, {"opened": True})

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
            elif "open" in request:
                self._open(request["open"])
            elif "close" in request:
                self._close(request["close"])
            else:
                self._session_request(request)
        except (ValueError, KeyError, TypeError) as exc:
            self._answer(None, {"id": None, "nonce": None, "error": f"bad request: {exc!r}"})

    def _session_request(self, request: dict[str, Any]) -> None:
        key = request.get("session")
        slot = self._slots.get(key)
        if slot is None or not slot.ready:
            self._answer(key, {"id": request.get("id"), "nonce": request.get("nonce"),
                               "error": f"no running session {key!r}"})  # fmt: skip
            return
        try:
            if "interrupt" in request:
                self._interrupt(key, slot, request["interrupt"])
            elif "file_op" not in request and (slot.loading or self._start_load(slot)):
                self._hold(key, slot, request)
            elif "snapshot_to" in request:
                self._hand_over(key, slot, request)
            elif request.get("file_op") == "copy_from":
                reply = {"id": request["id"], "nonce": request.get("nonce"),
                         **self._copy_from(request.get("from"), slot)}  # fmt: skip
                self._answer(key, reply)
                self._start_load(slot)  # a fork's files are in: its snapshot may load
            elif "file_op" in request:
                reply = {"id": request["id"], "nonce": request.get("nonce"),
                         **slot.file_op(request)}  # fmt: skip
                self._answer(key, reply)
            elif (busy := slot.start_call(request["id"], request.get("nonce"),
                                          {"code": str(request["code"])})) is not None:  # fmt: skip
                self._answer(key, busy)
        except SlotBroken as broken:
            self._broken(key, slot, broken)

    def _hand_over(self, key: Any, slot: Slot, request: dict[str, Any]) -> None:
        """A live fork's save, in one call: the session's snapshot, sealed, for this fork
        server's session `snapshot_to` to load next (`handover.py`). The reply is the save
        cell's, or says why the snapshot was not handed over."""
        to = request["snapshot_to"]
        target = self._slots.get(to)
        if self._memory is None or target is None or not target.ready or target is slot:
            self._answer(key, {"id": request["id"], "nonce": request.get("nonce"),
                               "error": f"no other running session {to!r}"})  # fmt: skip
            return
        busy = slot.start_call(request["id"], request.get("nonce"),
                               {"snapshot": self._memory.share}, hand_to=to)  # fmt: skip
        if busy is not None:
            self._answer(key, busy)

    def _interrupt(self, key: Any, slot: Slot, call_id: Any) -> None:
        """Interrupt call `call_id`: the running one, or one held back (then it never runs)."""
        held = slot.queued
        if held is None or held.get("id") != call_id:
            slot.interrupt(call_id)
            return
        slot.queued = None
        reply = cell_reply({"error": INTERRUPTED})
        self._answer(key, {"id": call_id, "nonce": held.get("nonce"), **reply,
                           "interrupted": True})  # fmt: skip

    @staticmethod
    def _start_load(slot: Slot) -> bool:
        """Start loading the snapshot handed to the session, if one waits: whether it did.
        Raises `SlotBroken`."""
        fds = slot.take_snapshot()
        if not fds:
            return False
        try:
            slot.start_call(None, None, {"load_snapshot": True}, fds=fds, internal=True)
        finally:
            close_all(fds)  # the executor has its own copies now (or the slot broke)
        return True

    def _hold(self, key: Any, slot: Slot, request: dict[str, Any]) -> None:
        """The worker's call to a session still loading its snapshot: run it once loaded."""
        if slot.queued is not None:
            self._answer(key, {"id": request.get("id"), "nonce": request.get("nonce"),
                               "error": "busy: one call at a time"})  # fmt: skip
            return
        slot.queued = request

    def _loaded(self, key: Any, slot: Slot, reply: dict[str, Any]) -> None:
        """A snapshot's load ended: the session goes on with the call it held, or, if the
        load failed, ends saying why (its next call says its state was lost)."""
        if reply.get("error"):
            why = reply["error"].strip().splitlines()[-1]
            self._end_session(key, f"its fork's state could not be loaded: {why}")
            return
        held, slot.queued = slot.queued, None
        if held is not None:
            self._session_request(held)

    def _handed_on(self, slot: Slot, reply: dict[str, Any]) -> dict[str, Any]:
        """A reply, and if it ends a hand-over call, its snapshot loaded by the session it is
        for; else the reply says why not."""
        handed = slot.take_handed()
        if handed is None:
            return reply
        if reply.get("error"):  # the save failed: whatever came with it goes
            close_all(handed.fds)
            return reply
        why = self._hand_on(slot, handed)
        return reply if why is None else {**reply, "error": f"the snapshot was refused: {why}"}

    def _hand_on(self, source: Slot, handed: Handed) -> str | None:
        """Keep the snapshot for its session if it is a memfd sealed in size within the
        share, with its writer's pipe; else close them, and say why."""
        target = self._slots.get(handed.to)
        try:
            if len(handed.fds) < 2:
                raise Refused("the interpreter sent no memory file with its writer's pipe")
            if target is None or not target.ready or target.loading:
                raise Refused(f"no running session {handed.to!r}")
            assert self._memory is not None  # a hand-over call starts on a fork server only
            check_handed(handed.fds[0], handed.fds[1], self._memory.share)
        except Refused as refused:
            close_all(handed.fds)
            return str(refused)
        source.watch_writer(os.dup(handed.fds[1]))
        target.give_snapshot(handed.fds)
        return None

    def _copy_from(self, source_key: Any, slot: Slot) -> dict[str, Any]:
        """Copy the working directory of this fork server's session `source_key` into the
        slot's, here (a fork's files, without a trip through the worker)."""
        source = self._slots.get(source_key) if source_key is not None else None
        if source is None or source.files is None or slot.files is None or source is slot:
            return {"refused": "invalid", "error": f"no other running session {source_key!r}"}
        try:
            copied, truncated = source.files.copy_into(slot.files)
        except FileRefused as refused:
            return {"refused": refused.reason, "error": str(refused)}
        return {"copied": copied, "truncated": truncated}

    def _open(self, key: Any) -> None:
        """Start a session (fork server only): a spare if one is ready (said at once), else
        a fork (its ready or its failure is said later)."""
        if self._spawn is None or key is None or key in self._slots or self._spares.owns(key):
            self._answer(key, {"gone": f"cannot open session {key!r} here"})
            return
        spare = self._spares.take()
        if spare is not None:
            self._rename(spare, key)
            self._answer(key, {"opened": True})
        else:
            self._fork(key)

    def _fork(self, key: Any) -> bool:
        ours, theirs = socket_pair()
        try:
            assert self._spawn is not None
            self._spawn(theirs)
        except OSError as exc:
            ours.close()
            self._end_session(key, f"the fork server is gone ({exc})")
            return False
        finally:
            theirs.close()
        slot = Slot(ours, executor=None, own_tree=True)
        self._add(key, slot)
        self._poller.register(slot.fileno(), select.POLLIN)
        return True

    def _fork_spares(self) -> None:
        if self._spawn is None:
            return
        for _ in range(self._spares.wanted()):
            if not self._fork(self._spares.forking()):
                return

    def _rename(self, old: Any, new: Any) -> None:
        slot = self._slots.pop(old)
        self._slots[new] = slot
        self._keys[slot.fileno()] = new
        self._baseline[new] = self._baseline.pop(old)

    def _close(self, key: Any) -> None:
        if key is not None and key in self._slots:
            self._drop(key).kill()

    def _drop(self, key: Any) -> Slot:
        slot = self._slots.pop(key)
        self._baseline.pop(key, None)
        self._keys.pop(slot.fileno(), None)
        with contextlib.suppress(KeyError, ValueError):
            self._poller.unregister(slot.fileno())
        return slot

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

    def _read_slot(self, fd: int) -> None:
        if fd not in self._keys:
            return
        key = self._keys[fd]
        slot = self._slots[key]
        try:
            for frame in slot.receive():
                if not slot.ready:
                    self._ready(key, slot, frame)
                elif (reply := slot.on_frame(frame)) is None:
                    continue
                elif reply.pop("internal", False):
                    self._loaded(key, slot, reply)
                else:
                    self._answer(key, self._handed_on(slot, reply))
        except SlotBroken as broken:
            self._broken(key, slot, broken)

    def _broken(self, key: Any, slot: Slot, broken: SlotBroken) -> None:
        if key is None:
            if broken.closed:
                self._executor_gone(key, slot)
            self._fail(str(broken))
        code = self._stop_executor(slot) if broken.closed else None
        self._end_session(key, str(broken) if code is None else _describe(code))

    @staticmethod
    def _stop_executor(slot: Slot) -> int | None:
        """A fork server's session closed its channel (its interpreter died, or user code
        closed it): its executor, killed if it still runs, is reaped here so the session is
        said to end as one container per session says it; its exit code, None if it could
        not be reaped in time (the reap loop then takes it)."""
        if slot.executor is None:
            return None
        with contextlib.suppress(ProcessLookupError):
            os.kill(slot.executor, signal.SIGKILL)
        code = _wait_exit(slot.executor, _EXIT_WAIT_S)
        if code is not None:
            slot.executor = None  # reaped: its pid may be another process's from now on
        return code

    def _end_session(self, key: Any, reason: str) -> None:
        """A session of a fork server is over: stopped, and said (a single session's end is
        the kernel's; a spare's is nobody's business)."""
        if key is None:
            self._fail(reason)
        if key in self._slots:
            self._drop(key).kill()
        if self._spares.owns(key):
            self._spares.lost(key)
            sys.stderr.write(f"kernel: a spare session ended: {reason}\n")
        else:
            self._answer(key, {"gone": reason})

    def _answer(self, key: Any, reply: dict[str, Any]) -> None:
        if key is not None:
            reply = {"session": key, **reply}
        _write_all(self._out, fit_line(reply))

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            for key, slot in list(self._slots.items()):
                if slot.executor == pid:
                    self._exited(key, status)

    def _exited(self, key: Any, status: int) -> None:
        code = _exit_code(status)
        if key is None:
            self._stop(code)
        self._slots[key].executor = None  # reaped: its pid may be another process's
        self._end_session(key, _describe(code))

    def _check_memory(self) -> None:
        """A session of a fork server over its memory share is ended, and told why: its
        address space limit bounds each process, this the session's processes together."""
        if self._memory is None:
            return
        sessions = {
            key: (slot.executor, self._baseline[key])
            for key, slot in self._slots.items()
            if key in self._baseline and slot.executor is not None
        }
        share = self._memory.share
        for key, used in self._memory.over(sessions).items():
            self._end_session(key, f"out of memory: it used {used >> 20} MiB, over "
                                   f"its share of {share >> 20} MiB")  # fmt: skip

    def _executor_gone(self, key: Any, slot: Slot) -> NoReturn:
        """A single session's executor closed its end: it died, or user code closed it."""
        if slot.executor is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(slot.executor, signal.SIGKILL)
            try:
                _, status = os.waitpid(slot.executor, 0)
            except ChildProcessError:  # already reaped: its status was handled there
                self._stop(BROKEN)
            self._stop(_exit_code(status))
        self._stop(BROKEN)

    def _fail(self, reason: str) -> NoReturn:
        sys.stderr.write(f"kernel: {reason}\n")
        sys.stderr.flush()
        self._stop(BROKEN)

    def _stop(self, code: int) -> NoReturn:
        for slot in self._slots.values():
            slot.kill()
        stop_tree(keep=0)
        os._exit(code)


def _exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


def _describe(code: int) -> str:
    """An exit code (128 + N for signal N) in the words the worker uses for a container's
    (`describe_exit` in taskyard.sandbox.channel), so both shapes say a session's end alike."""
    if code > 128:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(code - 128).name}"
    return f"the process exited with code {code}"


def _wait_exit(pid: int, within_s: float) -> int | None:
    """The exit code of our child `pid` once reaped; None if it is not reapable within
    `within_s` (a pid namespace's init is so only once the kernel has killed the rest of its
    namespace) or not ours to reap."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            reaped, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if reaped:
            return _exit_code(status)
        if time.monotonic() > deadline:
            return None
        time.sleep(0.005)


def _resident(pid: int | None) -> int:
    """What `pid` holds of the session's memory (`memory.py`), 0 if unknown or gone."""
    return 0 if pid is None else proportional(pid)


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
        code = BROKEN
    os._exit(code)


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kernel", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", action="store_true",
                        help="serve many sessions, each forked from a fork server")  # fmt: skip
    parser.add_argument("--memory", type=int, default=256 << 20, help="bytes per session")
    parser.add_argument("--pids", type=int, default=64, help="processes per session")
    parser.add_argument("--disk", type=int, default=64 << 20, help="bytes of /work per session")
    # cloudpickle: what a live fork's load imports (a snapshot names its functions), 24 ms.
    parser.add_argument("--preload", default="numpy,pandas,cloudpickle",
                        help="modules the fork server imports")  # fmt: skip
    parser.add_argument("--spares", type=int, default=2, help="sessions forked ahead, at least")
    parser.add_argument("--spares-max", type=int, default=6, help="sessions forked ahead, at most")
    return parser.parse_args(argv)


def _fork_server(limits: SessionLimits, preload: list[str]) -> SpawnSession:
    """Start the fork server; a function that asks it for a session on a socket."""
    from .zygote import serve

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    if os.fork() == 0:
        ours.close()
        try:
            serve(theirs, limits, preload)
        finally:
            os._exit(BROKEN)
    theirs.close()
    if ours.recv(16) != b"ready":  # the worker's ready means sessions fork from here on
        sys.stderr.write("kernel: the fork server did not start\n")
        os._exit(BROKEN)

    def spawn(session: socket.socket) -> None:
        socket.send_fds(ours, [b"s"], [session.fileno()])

    return spawn


def main(argv: list[str] | None = None) -> None:
    """Start the executor (or the fork server) and serve the worker until stdin ends."""
    args = _arguments(sys.argv[1:] if argv is None else argv)
    proto_in, proto_out = _take_protocol_fds()
    set_dumpable(False)  # same-uid processes can no longer open our fds or read our memory
    if os.getpid() != 1:
        set_child_subreaper()  # orphans of the cells come to us, so we can stop them
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if args.sessions:
        limits = SessionLimits(memory=args.memory, pids=args.pids, disk=args.disk)
        spawn = _fork_server(limits, [m for m in args.preload.split(",") if m])
        spares = Spares(args.spares, args.spares_max)
        Supervisor(proto_in, proto_out, spawn, limits, spares).serve()
    ours, theirs = socket_pair()
    executor = os.fork()
    if executor == 0:
        ours.close()
        os.close(proto_in)
        os.close(proto_out)
        _run_child(theirs)
    theirs.close()
    supervisor = Supervisor(proto_in, proto_out, spawn=None)
    supervisor.adopt(Slot(ours, executor, own_tree=False))
    supervisor.serve()
