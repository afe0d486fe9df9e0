"""One session walled off inside a shared sandbox container: its own namespaces, file systems,
limits and no capabilities, set up by trusted code between the fork server's fork and the first
cell (`zygote.py`).

Every session of a container runs as the same uid (the container grants no capability to
change it), so what keeps one session from another is what the kernel ties to namespaces:

- a user namespace each, owned by the container's sandbox uid: a session has no capability
  over its siblings, and the container's supervisor (in the parent namespace, same uid) has
  every one over each session, which is how it signals, reaps and reaches their files;
- a pid namespace each, the executor its init: a session can name, signal or wait for no
  process but its own, and when its executor dies the kernel kills everything it started;
- a mount namespace each: a private tmpfs at /work, /tmp and /dev/shm (so the disk share is
  the kernel's to hold), and /proc covered by an empty read-only tmpfs, so no session reads
  another's /proc/<pid> (a fresh /proc is refused in a container whose /proc has masked paths);
- a network, IPC and UTS namespace each: a loopback and abstract sockets of its own, no
  shared SysV object;
- rlimits per session: address space (what the fork server had, plus the session's share),
  processes (counted per user namespace since Linux 5.14, so one session's fork bomb does not
  starve another), file size and open files; the OOM killer is pointed at sessions first;
- then every capability is dropped and the executor installs its seccomp filter, which also
  refuses mount, unshare with other flags, setns and ptrace to the cells.
"""

from __future__ import annotations

import _socket
import contextlib
import ctypes
import fcntl
import functools
import os
import resource
import struct
from dataclasses import dataclass
from typing import NoReturn

__all__ = ["SessionLimits", "drop_capabilities", "enter_namespaces", "prepare", "wall_off"]

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
SESSION_NAMESPACES = (
    CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
)
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
_MS_REC, _MS_PRIVATE = 0x4000, 0x40000
_PR_CAPBSET_DROP = 24
_SIOCSIFFLAGS = 0x8914
_IFF_UP, _IFF_LOOPBACK, _IFF_RUNNING = 0x1, 0x8, 0x40
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_LAST_CAP = 63  # more than any kernel has: dropping an unknown one fails harmlessly
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
_LOOPBACK_UP = struct.pack("16sH14x", b"lo", _IFF_UP | _IFF_LOOPBACK | _IFF_RUNNING)  # ifreq
_libc = ctypes.CDLL(None, use_errno=True)
# Resolved at import, in the fork server: resolving them in each session would write there.
_unshare, _mount_call, _prctl, _capset = _libc.unshare, _libc.mount, _libc.prctl, _libc.capset


@dataclass(frozen=True)
class SessionLimits:
    """One session's share of its container."""

    memory: int  # bytes of address space above what the fork server had mapped
    pids: int  # processes and threads
    disk: int  # bytes of /work; /tmp and /dev/shm get a quarter each
    files: int = 256  # open files per process
    file_size: int = 1 << 30  # the largest file a cell may write


def _check(result: int, what: str) -> None:
    if result != 0:
        _failed(what)


def _failed(what: str) -> NoReturn:
    """Raise the last libc call's error (errno), saying what failed."""
    code = ctypes.get_errno()
    raise OSError(code, f"{what}: {os.strerror(code)}")


def enter_namespaces() -> None:
    """Unshare the session's namespaces; this process keeps its uid and gid inside (the only
    mapping a process without privileges may write). Its next child is the pid namespace's
    init."""
    uid, gid = os.getuid(), os.getgid()
    _check(_unshare(SESSION_NAMESPACES), "unshare")
    # Required before gid_map without privileges; gVisor refuses the file and takes gid_map
    # without it (Linux would then refuse gid_map, below).
    with contextlib.suppress(FileNotFoundError, PermissionError):
        _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")


def prepare(limits: SessionLimits) -> None:
    """Compute ahead what `wall_off` needs: a fork server does it once, before the forks, so
    that no session writes to the pages it shares to compute the same."""
    _mounts(limits, os.getuid(), os.getgid())


def wall_off(limits: SessionLimits) -> None:
    """In the pid namespace's init, before any user code: private file systems, limits, the
    OOM killer's preference; then no capabilities."""
    _write("/proc/self/oom_score_adj", "1000")  # a session goes first, never the supervisor
    mapped = _address_space()  # read before /proc is covered
    for source, target, kind, flags, data in _mounts(limits, os.getuid(), os.getgid()):
        if _mount_call(source, target, kind, flags, data) != 0:
            _failed(f"mount {target.decode()}")  # formatted only then: no string per mount
    _set_limits(limits, mapped)
    _loopback_up()
    drop_capabilities()
    os.chdir("/work")


_Mount = tuple[bytes | None, bytes, bytes | None, ctypes.c_ulong, bytes | None]


@functools.cache
def _mounts(limits: SessionLimits, uid: int, gid: int) -> tuple[_Mount, ...]:
    """mount(2)'s arguments, in order: / made private (nothing of ours leaks out), a tmpfs at
    /work, /tmp and /dev/shm, and /proc covered."""
    owner = f"uid={uid},gid={gid}"
    small = max(limits.disk // 4, 1 << 20)
    kept = _MS_NOSUID | _MS_NODEV
    plan = (
        (None, "/", None, _MS_REC | _MS_PRIVATE, None),
        ("tmpfs", "/work", "tmpfs", kept, f"size={limits.disk},mode=0700,{owner}"),
        ("tmpfs", "/tmp", "tmpfs", kept, f"size={small},mode=1777,{owner}"),
        ("tmpfs", "/dev/shm", "tmpfs", kept, f"size={small},mode=1777,{owner}"),
        ("tmpfs", "/proc", "tmpfs", _MS_RDONLY | kept | _MS_NOEXEC, "size=4k"),
    )
    return tuple(
        (_bytes(source), target.encode(), _bytes(kind), ctypes.c_ulong(flags), _bytes(data))
        for source, target, kind, flags, data in plan
    )


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


def _loopback_up() -> None:
    """The session's own loopback, up: a cell's local server answers its own clients (the
    new network namespace has only `lo`, and down)."""
    # _socket's own type: socket.socket's Python layer would run (and write) more.
    sock = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
    try:
        fcntl.ioctl(sock.fileno(), _SIOCSIFFLAGS, _LOOPBACK_UP)
    finally:
        sock.close()


def _set_limits(limits: SessionLimits, mapped: int) -> None:
    for which, value in (
        (resource.RLIMIT_AS, mapped + limits.memory),
        (resource.RLIMIT_NPROC, limits.pids),
        (resource.RLIMIT_NOFILE, limits.files),
        (resource.RLIMIT_FSIZE, limits.file_size),
        (resource.RLIMIT_CORE, 0),
    ):
        resource.setrlimit(which, (value, value))


def _address_space() -> int:
    """Bytes this process has mapped now (what it shares with the fork server)."""
    fd = os.open("/proc/self/statm", os.O_RDONLY)
    try:
        return int(os.read(fd, 256).split()[0]) * _PAGE_BYTES
    finally:
        os.close(fd)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]  # fmt: skip


# capset(2)'s arguments for no capability at all (made at import: a fork server's sessions
# share them).
_NO_CAPABILITIES = (_CapHeader(_LINUX_CAPABILITY_VERSION_3, 0), (_CapData * 2)())


def drop_capabilities() -> None:
    """No capability left, now or after an exec: the bounding set emptied, then the sets."""
    for cap in range(_LAST_CAP + 1):
        if _prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break  # past the kernel's last capability
    header, data = _NO_CAPABILITIES
    _check(_capset(ctypes.byref(header), ctypes.byref(data)), "capset")


def _write(path: str, text: str) -> None:
    """Write a /proc file with system calls alone (no file object to build)."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
