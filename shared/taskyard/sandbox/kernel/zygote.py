"""The fork server: an interpreter that has done the sandbox's common imports and never runs
user code. Each new session is a copy-on-write fork of it, walled off (`isolation.py`) before
its first cell, so a burst of sessions costs forks, not container starts and cold imports.

The supervisor asks for a session on a private SOCK_SEQPACKET socket: one message carrying the
session's socket end (SCM_RIGHTS). The fork's first child
unshares the namespaces and forks the session's executor, the init of its pid namespace, then
exits; the supervisor (the container's PID 1) inherits the executor and learns its pid from
the executor's first frame (SCM_CREDENTIALS).
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import random
import signal
import socket
import sys
from collections.abc import Iterable
from typing import NoReturn

from .display import prepare_matplotlib
from .executor import Kernel, null_stdin, run_executor
from .isolation import SessionLimits, enter_namespaces, prepare, wall_off
from .pools import fill_pools
from .seccomp import prepare_filter, set_dumpable
from .wire import encode_frame

__all__ = ["preload", "serve"]

_BROKEN = 70
_REQUEST_BYTES = 64
_MT_WORDS = 624  # numpy's legacy generator (MT19937): its state, in 32-bit words


def preload(modules: Iterable[str]) -> None:
    """Import what sessions are expected to import; a module the image lacks is skipped."""
    # One BLAS thread per session: a pool the fork server started does not survive a fork.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            sys.stderr.write(f"kernel: not preloaded: {name} ({exc})\n")


def serve(control: socket.socket, limits: SessionLimits, modules: Iterable[str]) -> NoReturn:
    """Preload, say so, then fork one session per request until the supervisor closes
    `control`."""
    set_dumpable(False)  # sessions run as our uid: none may read our memory
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # each first child ends at once: no zombie
    preload(modules)
    _prepare(limits)
    _warm_up()
    fill_pools()
    gc.freeze()  # the collector then leaves the shared objects' pages unwritten in the forks
    control.send(b"ready")
    while True:
        message, fds, _, _ = socket.recv_fds(control, _REQUEST_BYTES, 1)
        if not message:
            os._exit(0)  # the supervisor is gone
        for fd in fds[1:]:
            os.close(fd)
        if fds and os.fork() == 0:
            control.close()
            _become_session(socket.socket(fileno=fds[0]), limits)
        for fd in fds[:1]:
            os.close(fd)


def _prepare(limits: SessionLimits) -> None:
    """Make here, once, what each session's set-up would otherwise make itself, writing to
    pages it shares with us: its mounts' arguments, its seccomp program, matplotlib's
    environment, its stdin."""
    prepare(limits)
    prepare_filter()
    prepare_matplotlib()
    null_stdin()


def _warm_up() -> None:
    """Run once what every first cell runs (a cell's compile and exec, a DataFrame's repr, a
    reply's encoding), so that the caches and lazy imports it fills sit in pages the forks
    share instead of being written in each."""
    kernel = Kernel()
    for code in _WARM_UP:
        kernel.run(code)
    json.dumps(kernel.run("1"))
    sys.modules["__main__"].__dict__.clear()


# What the fork server runs before forking (its output goes nowhere).
_WARM_UP = (
    "import numpy, pandas\nframe = pandas.DataFrame(numpy.ones((3, 3)))\nprint(len(frame))",
    "frame",
    "frame.describe()",
)


def _become_session(sock: socket.socket, limits: SessionLimits) -> NoReturn:
    """In the fork: namespaces, then the executor as their init, walled off, serving cells."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    try:
        # Dumpable, unlike the fork server: else /proc/self is root's (its maps cannot be
        # written), and the supervisor could not reach the session's /work through its root.
        # No other session can use that: none sees /proc, and none may ptrace (seccomp).
        set_dumpable(True)
        enter_namespaces()
        if os.fork() != 0:
            os._exit(0)  # the executor goes to the supervisor, the container's init
        wall_off(limits)
        _reseed()
    except BaseException as exc:
        sock.sendall(encode_frame({"fatal": f"the session could not be walled off: {exc}"}))
        os._exit(_BROKEN)
    code = 0
    try:
        run_executor(sock)
    except BaseException:
        code = _BROKEN
    os._exit(code)


def _reseed() -> None:
    """A fork copies the random generators' state: each session reseeds its own. numpy's
    global generator gets a whole state from the kernel's entropy, set directly: its
    `seed()` goes through SeedSequence and writes several times as many shared pages."""
    random.seed()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        key = numpy.frombuffer(os.urandom(4 * _MT_WORDS), dtype=numpy.uint32)
        numpy.random.set_state(("MT19937", key, _MT_WORDS, 0, 0.0))
