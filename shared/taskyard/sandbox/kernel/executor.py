"""The executor: the process that runs cells, and nothing else.

It keeps one namespace across cells. What a cell prints is captured per cell: writes from the
main thread and from threads the cell started go to the cell; a thread left running by an
earlier cell writes to nowhere, so its output never lands in a later cell. The same holds for
its rich outputs (`display.py`): ``display(obj)`` is a builtin, as in IPython.
"""

from __future__ import annotations

import ast
import builtins
import gc
import io
import linecache
import os
import signal
import socket
import sys
import threading
import time
import traceback
import types
from collections.abc import Callable
from typing import Any

from . import INTERRUPTED, OUTPUT_LIMIT
from .display import CellOutputs, Publisher, install, setup_matplotlib
from .handover import close_all, passed_fds, reap_writers, rights_space, send_with_fds
from .processes import collected
from .seccomp import install_filter
from .snapshot import take_sealed
from .wire import FrameBuffer, encode_frame

__all__ = ["CappedText", "Kernel", "null_stdin", "run_executor"]

_CLEANUP_WAIT_S = 0.5  # after an interrupt: for killed children to be reapable, pools to end
_SNAPSHOT = "__import__('kernel.snapshot').snapshot"  # the module, as a cell reaches it
_READY = encode_frame({"ready": True})  # encoded at import: a fork server's sessions share it


class CappedText(io.TextIOBase):
    """A text sink that keeps the first OUTPUT_LIMIT characters and counts the rest."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._kept = 0
        self._dropped = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        room = OUTPUT_LIMIT - self._kept
        if room > 0:
            self._parts.append(text[:room])
            self._kept += min(room, len(text))
        self._dropped += max(0, len(text) - max(room, 0))
        return len(text)

    def getvalue(self) -> str:
        text = "".join(self._parts)
        if self._dropped:
            text += f"\n[... {self._dropped} more characters not shown]\n"
        return text


class _Cell:
    """One cell's output, and the threads that existed before it (they are not its own)."""

    def __init__(self) -> None:
        self.stdout = CappedText()
        self.stderr = CappedText()
        self.outputs = CellOutputs(self.stderr.write)
        main = threading.main_thread().ident
        self.older = {t.ident for t in threading.enumerate() if t.ident != main}

    def mine(self) -> bool:
        """Whether the calling thread is the cell's (not one an earlier cell left running)."""
        return threading.get_ident() not in self.older


class _Router(io.TextIOBase):
    """sys.stdout / sys.stderr for the whole process: each write goes to the right cell."""

    def __init__(self, kernel: Kernel, stream: str) -> None:
        self._kernel = kernel
        self._stream = stream

    encoding = "utf-8"

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        cell = self._kernel.cell
        if cell is not None and cell.mine():
            getattr(cell, self._stream).write(text)
        return len(text)


def _capped(text: str | None) -> str | None:
    if text is None or len(text) <= OUTPUT_LIMIT:
        return text
    return text[:OUTPUT_LIMIT] + f"\n[... {len(text) - OUTPUT_LIMIT} more characters not shown]"


class Kernel:
    """A persistent namespace that runs cells and turns each into one reply."""

    def __init__(self) -> None:
        # A real __main__ module, so what cells define can be pickled (multiprocessing).
        main = types.ModuleType("__main__")
        sys.modules["__main__"] = main
        self.namespace: dict[str, Any] = main.__dict__
        self.pid = os.getpid()
        self.running = False
        self.interrupted = False  # the running cell got the supervisor's SIGINT
        self.cell: _Cell | None = None
        self._cells = 0
        self._streams = (_Router(self, "stdout"), _Router(self, "stderr"))
        self.publisher = Publisher(self._outputs)
        install(self.publisher)
        builtins.display = self.publisher.display  # type: ignore[attr-defined]

    def _outputs(self) -> CellOutputs | None:
        cell = self.cell
        return cell.outputs if cell is not None and cell.mine() else None

    def on_sigint(self, signum: int, frame: Any) -> None:
        # Only a running cell is interrupted; a late signal must not kill the idle loop.
        if self.running:
            self.interrupted = True
            raise KeyboardInterrupt

    def run(self, code: str, started: Callable[[], None] = lambda: None) -> dict[str, Any]:
        """Run one cell; return its stdout, stderr, last value and error.

        `started` is called once SIGINT would stop the cell, before any of its code runs.
        """
        cell = _Cell()
        self.interrupted = False
        result: str | None = None
        error: str | None = None
        self.cell = cell
        sys.stdout, sys.stderr = self._streams  # again: the user may have replaced them
        try:
            try:
                self.running = True
                started()
                try:
                    result = self._execute(code)
                finally:
                    self._end_figures()  # after an error too, as Jupyter does
            finally:
                self.running = False  # first: a SIGINT from here on is ignored
        except KeyboardInterrupt:
            error = INTERRUPTED
        except BaseException as exc:
            error = self._format_error(exc)
        finally:
            if os.getpid() != self.pid:
                os._exit(0)  # a child the cell forked must never answer or read requests
            self.cell = None
        if self.interrupted:
            _terminate_pools()
        return {
            "stdout": cell.stdout.getvalue(),
            "stderr": cell.stderr.getvalue(),
            "result": _capped(result),
            "error": _capped(error),
            "display": cell.outputs.items,
        }

    def _end_figures(self) -> None:
        """Show the figures the cell left open; an interrupted cell's are only closed."""
        if self.interrupted:
            self.publisher.close_figures()
        else:
            self.publisher.show_figures()

    def _execute(self, code: str) -> str | None:
        self._cells += 1
        filename = f"<cell-{self._cells}>"
        # Registered so tracebacks can quote the cell's lines.
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        tree = ast.parse(code, filename)
        last = tree.body[-1] if tree.body else None
        if isinstance(last, ast.Expr):  # evaluated apart: its value is the cell's result
            tree.body.pop()
        exec(compile(tree, filename, "exec"), self.namespace)
        if not isinstance(last, ast.Expr):
            return None
        value = eval(compile(ast.Expression(last.value), filename, "eval"), self.namespace)
        if value is None:
            return None
        self.namespace["_"] = value
        self.publisher.show_value(value)  # a figure, an image, a table: an output too
        return repr(value)

    @staticmethod
    def _format_error(exc: BaseException) -> str:
        tb = exc.__traceback__
        # Drop the kernel's own frames: the user should see their cell only.
        while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
            tb = tb.tb_next
        return "".join(traceback.format_exception(type(exc), exc, tb))


def _terminate_pools() -> None:
    """End every process pool: the supervisor killed their workers, and a pool would start
    new ones that take its remaining tasks. Bounded: a pool that hangs is left behind."""
    pools = sys.modules.get("multiprocessing.pool")
    if pools is None:
        return
    found = [o for o in gc.get_objects() if isinstance(o, pools.Pool)]
    ending = [
        threading.Thread(target=pool.terminate, daemon=True)
        for pool in found
        if not isinstance(pool, pools.ThreadPool)
    ]
    for thread in ending:
        thread.start()
    deadline = time.monotonic() + _CLEANUP_WAIT_S
    for thread in ending:
        thread.join(max(0.0, deadline - time.monotonic()))


def _reap(pids: list[int]) -> None:
    """Collect children the supervisor killed, so their zombies free the process budget.

    Bounded by a short wait: a pid that is not (or no longer) our child is skipped.
    """
    deadline = time.monotonic() + _CLEANUP_WAIT_S
    waiting = set(pids)
    while waiting and time.monotonic() < deadline:
        waiting -= collected(waiting)
        if waiting:
            time.sleep(0.005)


def _quiet_stdio() -> None:
    """fds 0-2 become /dev/null: nothing the user writes reaches a log or a pipe."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    null_stdin()


def null_stdin() -> None:
    """sys.stdin reads /dev/null. Made once: a fork server makes it before its forks, so that
    its sessions share the object instead of each building one."""
    if getattr(sys.stdin, "name", None) != os.devnull:
        sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - lives as long as the process


def _serve(sock: socket.socket, kernel: Kernel) -> None:
    frames = FrameBuffer(limit=1 << 62)  # from the supervisor: trusted
    passed: list[int] = []  # descriptors the supervisor sent, each for the request it came with
    while True:
        chunk, ancillary, _, _ = sock.recvmsg(1 << 16, rights_space(), socket.MSG_CMSG_CLOEXEC)
        if not chunk:
            return
        passed += passed_fds(ancillary)
        frames.feed(chunk)
        while (request := frames.pop_frame()) is not None:
            if "reap" in request:
                _reap(request["reap"])
                continue
            reap_writers()
            # "started" lets the supervisor hold back a SIGINT the cell could not yet catch.
            reply = kernel.run(
                _cell_code(request, passed),
                started=lambda: sock.sendall(encode_frame({"started": True})),
            )
            _send_reply(sock, reply)


def _cell_code(request: dict[str, Any], passed: list[int]) -> str:
    """The cell a request runs: its code, or a live fork's save or load of a sealed snapshot
    (`snapshot.py`), which runs as a cell does (interruptible, its errors said)."""
    if "snapshot" in request:
        return f"{_SNAPSHOT}.save_sealed(globals(), {int(request['snapshot'])})"
    if "load_snapshot" in request:
        fd, done = passed.pop(0), passed.pop(0)
        return f"{_SNAPSHOT}.load_sealed(globals(), {fd}, {done})"
    return str(request.get("code", ""))


def _send_reply(sock: socket.socket, reply: dict[str, Any]) -> None:
    """The reply, with the snapshot the cell made and its writer's pipe, if it made one (then
    ours no more)."""
    handed = take_sealed()
    if handed is None:
        sock.sendall(encode_frame(reply))
        return
    try:
        send_with_fds(sock, encode_frame(reply), list(handed))
    finally:
        close_all(handed)


def run_executor(sock: socket.socket) -> None:
    """The executor's life, in the forked child: harden, say ready, serve until EOF."""
    try:
        install_filter()
    except OSError as exc:
        sock.sendall(encode_frame({"fatal": f"the interpreter could not start: {exc}"}))
        return
    setup_matplotlib()
    kernel = Kernel()
    signal.signal(signal.SIGINT, kernel.on_sigint)
    # A child forked by a cell must not hold the channel (subprocesses never do: it is CLOEXEC).
    os.register_at_fork(after_in_child=sock.close)
    _quiet_stdio()  # last: until here, a failure's traceback still reaches stderr
    sock.sendall(_READY)
    _serve(sock, kernel)
