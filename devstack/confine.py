"""Start a tool worker with no path to the Docker engine but the engine proxy.

`python -m devstack.confine -- ARGV...`, run as root, execs ARGV (the same process, so the
stack's signals and exit codes reach it) after it has:

1. made a mount namespace of its own, every mount private (nothing it mounts leaks out);
2. hidden the engine: a fresh tmpfs over /run (so over /var/run: docker.sock, containerd's
   socket, everything under them) and over the engines' state and configuration
   (`ENGINE_PATHS`); a private, writable tmpfs at /tmp, /var/tmp and /dev/shm;
3. kept what the worker runs from reachable: the checkout, the venv and the interpreter's
   prefix. Where one lies under a directory others cannot enter (/root is 0700, a `mktemp -d`),
   that directory is covered by a 0755 tmpfs holding read-only binds of exactly those paths;
4. become a user of its own: uid and gid `UID_BASE` plus its pid (unique among the workers
   running, so no worker can signal, trace or read the environment, the token, of another),
   no supplementary groups (so not `docker`), every capability gone (bounding and inheritable
   sets too) and no_new_privs (no setuid program or file capability gives any back).

It checks the result before it execs (fails rather than run a worker less confined) and sets
HOME to the private /tmp, the one place the worker may write. Linux only; Python 3.11 has no
`os.unshare`, so the system calls go through libc.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ENGINE_PATHS",
    "SCRATCH",
    "UID_BASE",
    "Plan",
    "can_confine",
    "confined_argv",
    "needed_paths",
    "plan",
]

# Above any uid a distribution or a user namespace's subordinate range hands out, and with a pid
# added (at most 2**22) still below 2**31, which some tools read as signed.
UID_BASE = 0x70000000
# Where engines keep sockets, state and configuration (/var/run is a link to /run on Debian,
# a directory of its own elsewhere).
ENGINE_PATHS = ("/run", "/var/run", "/var/lib/docker", "/var/lib/containerd", "/etc/docker")
# Private and writable by the worker, as a fresh machine's are; sizes are ceilings (a tmpfs
# holds memory only for what is written).
SCRATCH = {"/tmp": "size=512m", "/var/tmp": "size=64m", "/dev/shm": "size=64m"}

# The checkout, found as `devstack.procs` finds it, without that module's imports (httpx: a
# quarter of a second for each worker started).
_CHECKOUT = Path(__file__).resolve().parent.parent

_CLONE_NEWNS = 0x00020000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV = 0x1, 0x2, 0x4
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000
_PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS = 24, 38
_CAP_VERSION_3 = 0x20080522
_ZEROS = (ctypes.c_ulong(0),) * 3  # prctl's unused arguments
_NEEDED_CAPS = (6, 7, 8, 21)  # CAP_SETGID, CAP_SETUID, CAP_SETPCAP, CAP_SYS_ADMIN
_CAP_SETS = {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}

_libc = ctypes.CDLL(None, use_errno=True)  # the libc this interpreter links


@dataclass(frozen=True)
class Plan:
    """What to mount: tmpfs at each of `covers` (path to its options), then read-only binds of
    `kept` that a cover hid."""

    covers: dict[str, str]
    kept: tuple[str, ...]


def can_confine() -> bool:
    """Whether this process may confine a worker: root with the capabilities the mounts and the
    uid change need (root in an unprivileged container lacks CAP_SYS_ADMIN)."""
    if sys.platform != "linux" or os.geteuid() != 0:
        return False
    effective = int(_status()["CapEff"], 16)
    return all(effective >> cap & 1 for cap in _NEEDED_CAPS)


def confined_argv(argv: Sequence[str]) -> list[str]:
    """`argv` started through this launcher, by this interpreter."""
    return [sys.executable, "-m", "devstack.confine", "--", *argv]


def needed_paths() -> list[str]:
    """What the worker runs from: the checkout, the venv, the interpreter's prefix."""
    paths = (_CHECKOUT, sys.prefix, sys.base_prefix, Path(sys.executable).resolve().parent)
    return [os.path.realpath(path) for path in paths]


def plan(kept: Iterable[str]) -> Plan:
    """The mounts that hide the engine and keep `kept` (absolute, resolved) reachable."""
    kept = _outermost(kept)
    engine = {os.path.realpath(path) for path in ENGINE_PATHS}
    covers = {path: "mode=0755,size=1m" for path in engine if os.path.isdir(path)}
    scratch = {path: size for path, size in SCRATCH.items() if os.path.isdir(path)}
    covers.update({path: f"mode=1777,{size}" for path, size in scratch.items()})
    for path in kept:
        closed = _closed_ancestor(path)
        if closed:
            covers[closed] = "mode=0755,size=1m"
    tops = _outermost(covers)
    return Plan({path: covers[path] for path in tops}, tuple(kept))


def _outermost(paths: Iterable[str]) -> list[str]:
    """`paths` without those lying under another of them, sorted."""
    tops: list[str] = []
    for path in sorted(set(paths)):
        if not any(_under(path, top) for top in tops):
            tops.append(path)
    return tops


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def _closed_ancestor(path: str) -> str | None:
    """The outermost directory above `path` that a user without groups cannot enter."""
    parts = Path(path).parts
    for depth in range(2, len(parts)):
        ancestor = os.path.join(*parts[:depth])
        if not os.stat(ancestor).st_mode & 0o001:
            return ancestor
    return None


def apply(layout: Plan) -> None:
    """A mount namespace of our own, laid out as `layout` says."""
    _call(_libc.unshare, _CLONE_NEWNS)
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    # Held before the covers hide them, and after the unshare: a bind's source must be a mount
    # of this namespace.
    held = {path: os.open(path, os.O_PATH | os.O_DIRECTORY) for path in layout.kept}
    for cover, options in layout.covers.items():
        _mount("tmpfs", cover, "tmpfs", _MS_NOSUID | _MS_NODEV, options)
        for path, fd in held.items():
            if _under(path, cover):
                _bind_read_only(f"/proc/self/fd/{fd}", path)
    for fd in held.values():
        os.close(fd)


def _bind_read_only(source: str, target: str) -> None:
    os.makedirs(target, mode=0o755, exist_ok=True)
    _mount(source, target, None, _MS_BIND | _MS_REC)
    flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV
    _mount(None, target, None, flags)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    def encoded(text: str | None) -> bytes | None:
        return text.encode() if text is not None else None

    _call(_libc.mount, encoded(source), target.encode(), encoded(fstype), flags, data.encode())


def drop_to(uid: int) -> None:
    """Become `uid` (and gid `uid`) alone: no groups, no capabilities, no_new_privs."""
    last_cap = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    for cap in range(last_cap + 1):
        _call(_libc.prctl, _PR_CAPBSET_DROP, ctypes.c_ulong(cap), *_ZEROS)
    _call(_libc.prctl, _PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), *_ZEROS)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)  # clears the permitted, effective and ambient sets
    header = (ctypes.c_uint32 * 2)(_CAP_VERSION_3, 0)
    _call(_libc.capset, header, (ctypes.c_uint32 * 6)())  # and the inheritable set


def check(uid: int, kept: Iterable[str]) -> None:
    """Raise unless this process is `uid` alone, without capabilities, and reaches `kept`."""
    status = _status()
    wrong = [name for name in _CAP_SETS if int(status[name], 16) != 0]
    if os.getresuid() != (uid,) * 3 or os.getresgid() != (uid,) * 3 or os.getgroups():
        wrong.append("uid, gid or groups")
    if status["NoNewPrivs"] != "1":
        wrong.append("NoNewPrivs")
    wrong += [path for path in kept if not os.access(path, os.R_OK | os.X_OK)]
    if wrong:
        raise SystemExit(f"devstack.confine: not confined as planned: {', '.join(wrong)}")


def _status() -> dict[str, str]:
    lines = Path("/proc/self/status").read_text().splitlines()
    return {name: value.strip() for name, value in (line.split(":\t", 1) for line in lines)}


def _call(function: Callable[..., int], *args: object) -> None:
    if function(*args) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{getattr(function, '__name__', function)}: {os.strerror(errno)}")


def main(argv: Sequence[str]) -> None:
    if not argv or argv[0] != "--" or len(argv) < 2:
        raise SystemExit("usage: python -m devstack.confine -- ARGV...")
    workdir, layout, uid = os.getcwd(), plan(needed_paths()), UID_BASE + os.getpid()
    apply(layout)
    drop_to(uid)
    check(uid, layout.kept)
    os.chdir(workdir)  # anew, through the mounts: the old one is the directory they cover
    os.execve(argv[1], list(argv[1:]), {**os.environ, "HOME": "/tmp"})


if __name__ == "__main__":
    main(sys.argv[1:])
