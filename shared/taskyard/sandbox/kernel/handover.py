"""A live fork's snapshot handed from one session of a fork server to another in memory: a
memory file (memfd) the source fills and seals, passed as a descriptor (SCM_RIGHTS) over the
executors' sockets through the supervisor, and mapped copy-on-write by the new session.

The copy is written behind the fork's answer (`written_behind`): the source's save pickles its
namespace (its arrays by reference), sizes the memfd and seals its size, then forks a child
that holds every page as it was at that instant (copy-on-write) and writes them into the
memfd while the source goes on. The child seals the memfd against writing and says so on a
pipe (`DONE`); the new session reads that pipe before it maps anything (`await_written`).

The seals are what the new session relies on, not the source's good conduct: once a memfd has
every one of `SEALS`, no process holding it (the source's code included, with a copy of the
descriptor or a thread still running) can write, grow or shrink it, nor lift a seal, and a
write seal is only granted while no writable shared mapping of it exists. So the new session's
private mapping never changes under it (nor, shrunk, faults). The supervisor keeps
descriptors only while the save it asked for runs (the first two, from the executor's pid),
and hands them on only when `check` finds a memfd sealed in size within the share and a pipe;
every other descriptor an executor sends it is closed unread. The new session, before any
code of its own runs, maps the memfd only once `await_written` finds every seal on it.
"""

from __future__ import annotations

import array
import fcntl
import os
import select
import socket
import stat
from typing import NoReturn

from .processes import collected

__all__ = [
    "DONE", "MOST_FDS", "SEALS", "SIZE_SEALS", "Refused", "await_written", "check", "close_all",
    "passed_fds", "readable_within", "reap_writers", "rights_space", "send_with_fds",
    "written_behind",
]  # fmt: skip

SIZE_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW  # set before the copy is written
SEALS = SIZE_SEALS | fcntl.F_SEAL_SEAL | fcntl.F_SEAL_WRITE  # set once it is
DONE = b"1"  # what the writer says on its pipe once the memfd holds the copy, sealed
MOST_FDS = 4  # descriptors one receive takes; the kernel discards any beyond (MSG_CTRUNC)
_FD = array.array("i").itemsize  # bytes of one descriptor in SCM_RIGHTS (a C int)
_writers: set[int] = set()  # the writers this process forked, until reaped


class Refused(Exception):
    """A descriptor that is not a sealed snapshot the supervisor may hand on; says why."""


def written_behind(pieces: list[bytes | memoryview], size: int) -> tuple[int, int]:
    """A memfd of `size` bytes (close-on-exec, its size sealed) that a child forked here fills
    with `pieces` in order and seals, and the read end of the pipe on which that child says
    `DONE`. The child holds the pieces as they are now (copy-on-write), so the caller may change
    them at once. Where no child can be forked (the session's process limit), they are written
    here first. The bytes are copied once, by the kernel, straight from the objects' memory."""
    fd = os.memfd_create("taskyard-fork", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, size)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SIZE_SEALS)
        done, said = os.pipe2(os.O_CLOEXEC)
    except BaseException:
        os.close(fd)
        raise
    try:
        pid = os.fork()
    except OSError:  # EAGAIN: no process to spare
        pid = None
    if pid == 0:
        _fill_and_exit(fd, pieces, said)
    try:
        if pid is None:
            _fill(fd, pieces)
            os.write(said, DONE)
        else:
            _writers.add(pid)
    except BaseException:
        os.close(fd)
        os.close(done)
        raise
    finally:
        os.close(said)
    return fd, done


def _fill_and_exit(fd: int, pieces: list[bytes | memoryview], said: int) -> NoReturn:
    """The writer's life: the copy, its seals, `DONE`; nothing else (no cleanup of the
    parent's, no reply: it exits without unwinding)."""
    code = 1
    try:
        _fill(fd, pieces)
        os.write(said, DONE)
        code = 0
    finally:
        os._exit(code)


def _fill(fd: int, pieces: list[bytes | memoryview]) -> None:
    offset = 0
    for piece in pieces:
        view = memoryview(piece).cast("B")
        while view:
            written = os.pwrite(fd, view, offset)
            offset += written
            view = view[written:]
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS)


def reap_writers() -> None:
    """Collect the writers that ended."""
    _writers.difference_update(collected(_writers))


def await_written(fd: int, done: int, within_s: float) -> None:
    """Wait until the writer said `DONE` on `done` (closed here), then check `fd` has every
    seal; raises `Refused` saying why not. Interruptible (a signal's handler may raise)."""
    try:
        ready = readable_within(done, within_s)
        said = os.read(done, 1) if ready else b""
    finally:
        os.close(done)
    if not ready:
        raise Refused(f"its writer did not finish within {within_s:g}s")
    if said != DONE:
        raise Refused("its writer ended before the copy was written (the source session was "
                      "stopped meanwhile)")  # fmt: skip
    if fcntl.fcntl(fd, fcntl.F_GET_SEALS) & SEALS != SEALS:
        raise Refused("it is not sealed against writing, growing and shrinking")


def check(fd: int, done: int, most: int) -> None:
    """Raises `Refused` unless `fd` is a memfd of at most `most` bytes whose size is sealed
    and `done` a pipe (the writer's)."""
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)  # EINVAL: not a memory file of any kind
        st = os.fstat(fd)
        name = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        raise Refused("it is not a memory file (memfd)") from None
    if not stat.S_ISREG(st.st_mode) or not name.startswith("/memfd:"):
        raise Refused("it is not a memory file (memfd)")
    if seals & SIZE_SEALS != SIZE_SEALS:
        raise Refused("it is not sealed against growing and shrinking")
    if st.st_size > most:
        raise Refused(f"it is {st.st_size} bytes, over the session's memory share of {most}")
    if not stat.S_ISFIFO(os.fstat(done).st_mode):
        raise Refused("it came without its writer's pipe")


def readable_within(fd: int, within_s: float) -> bool:
    """Whether `fd` turns readable (or its other end closes) within `within_s`. poll, not
    select: a supervisor may hold descriptors past FD_SETSIZE."""
    wait = select.poll()
    wait.register(fd, select.POLLIN)
    return bool(wait.poll(within_s * 1000))


def close_all(fds: list[int] | tuple[int, ...]) -> None:
    """Close every descriptor of `fds` (what one hand-over carries)."""
    for fd in fds:
        os.close(fd)


def passed_fds(ancillary: list[tuple[int, int, bytes]]) -> list[int]:
    """The descriptors a receive took (SCM_RIGHTS); the caller owns and closes them."""
    fds: list[int] = []
    for level, kind, data in ancillary:
        if (level, kind) == (socket.SOL_SOCKET, socket.SCM_RIGHTS):
            fds += array.array("i", data[: len(data) - len(data) % _FD])
    return fds


def rights_space() -> int:
    """Ancillary room for the most descriptors one receive takes."""
    return socket.CMSG_SPACE(MOST_FDS * _FD)


def send_with_fds(sock: socket.socket, data: bytes, fds: list[int]) -> None:
    """All of `data`, the descriptors riding with its first byte."""
    rights = (socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())
    sent = sock.sendmsg([data], [rights])
    if sent < len(data):
        sock.sendall(data[sent:])
