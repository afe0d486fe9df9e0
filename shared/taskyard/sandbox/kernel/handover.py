"""A live fork's snapshot handed from one session of a fork server to another in memory: a
memory file (memfd) the source writes and seals, passed as a descriptor (SCM_RIGHTS) over the
executors' sockets through the supervisor, and mapped copy-on-write by the new session.

The seals are what the new session relies on, not the source's good conduct: once a memfd has
every one of `SEALS`, no process holding it (the source's code included, with a copy of the
descriptor or a thread still running) can write, grow or shrink it, nor lift a seal, and a
write seal is only granted while no writable shared mapping of it exists. So the new session's
private mapping never changes under it (nor, shrunk, faults). The supervisor keeps a
descriptor only while the save it asked for runs (the first one, from the executor's pid), and
hands it on only when `check` finds it such a file; every other descriptor an executor sends
it is closed unread.
"""

from __future__ import annotations

import array
import fcntl
import os
import socket
import stat
from collections.abc import Iterable

__all__ = [
    "MOST_FDS", "SEALS", "Refused", "check", "passed_fds", "rights_space", "sealed_file",
    "send_with_fd",
]  # fmt: skip

SEALS = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
MOST_FDS = 4  # descriptors one receive takes; the kernel discards any beyond (MSG_CTRUNC)
_FD = array.array("i").itemsize  # bytes of one descriptor in SCM_RIGHTS (a C int)


class Refused(Exception):
    """A descriptor that is not a sealed snapshot the supervisor may hand on; says why."""


def sealed_file(pieces: Iterable[bytes | memoryview]) -> int:
    """A new memfd holding `pieces` in order, sealed; its descriptor (close-on-exec). The bytes
    are copied once, by the kernel, straight from the objects' memory."""
    fd = os.memfd_create("taskyard-fork", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        for piece in pieces:
            view = memoryview(piece).cast("B")
            while view:
                view = view[os.write(fd, view) :]
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check(fd: int, most: int) -> None:
    """Raises `Refused` unless `fd` is a memfd with every seal and at most `most` bytes."""
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)  # EINVAL: not a memory file of any kind
        st = os.fstat(fd)
        name = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        raise Refused("it is not a memory file (memfd)") from None
    if not stat.S_ISREG(st.st_mode) or not name.startswith("/memfd:"):
        raise Refused("it is not a memory file (memfd)")
    if seals & SEALS != SEALS:
        raise Refused("it is not sealed against writing, growing and shrinking")
    if st.st_size > most:
        raise Refused(f"it is {st.st_size} bytes, over the session's memory share of {most}")


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


def send_with_fd(sock: socket.socket, data: bytes, fd: int) -> None:
    """All of `data`, the descriptor riding with its first byte."""
    rights = (socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]).tobytes())
    sent = sock.sendmsg([data], [rights])
    if sent < len(data):
        sock.sendall(data[sent:])
