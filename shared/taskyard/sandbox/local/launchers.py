"""How the local backend starts a kernel: the launcher command lines, and what their
failures mean.

Launchers, best first:

- `bwrap` (bubblewrap): new user, pid, net, ipc, uts, cgroup and mount namespaces; no further
  user namespaces (``--disable-userns``); a read-only root with /usr, tmpfs /work, /tmp and
  /dev/shm of the disk size, a read-only /dev; uid 65534; the kernel as PID 1;
- `unshare`: namespaces only (the host's file system stays visible), then setpriv to uid
  65534 when run as root.

Both run with an empty environment (nothing of the worker's reaches /proc/*/environ) under
`prlimit`: file size, open files, no core dumps, no message queue bytes, and the address space
per process only where no cgroup caps the sandbox as a whole. A worker running as root first
becomes uid 65534, so bubblewrap builds an unprivileged user namespace.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LAUNCHERS", "LaunchSpec", "explain_failure", "parse_size"]

INNER_HOME = "/opt/taskyard"  # the kernel package's parent inside a bwrap sandbox
NOBODY = "65534"
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)b?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """Bytes in a Docker-style size ("256m", "1g", "65536")."""
    match = _SIZE.match(text)
    if match is None:
        raise ValueError(f"not a size: {text!r}")
    number, unit = match.groups()
    return int(float(number) * 1024 ** "_kmgt".index(unit.lower() or "_"))


@dataclass(frozen=True)
class LaunchSpec:
    """What every launcher needs: the interpreter, the kernel package's parent (a directory
    uid 65534 can read: `kernel_copy.KernelCopy`) and the limits rlimits enforce."""

    python: str
    kernel_home: Path
    memory: int  # bytes; a per-process address-space cap only when `rlimit_memory`
    disk: int  # bytes, per tmpfs and per file
    as_root: bool = os.geteuid() == 0
    rlimit_memory: bool = True

    def prlimit(self) -> list[str]:
        # No POSIX message queue bytes: the unshare launcher leaves the host's /dev/mqueue
        # in view, and a queue made there would be the host's.
        argv = ["prlimit", f"--fsize={self.disk}", "--nofile=256", "--core=0", "--msgqueue=0"]
        if self.rlimit_memory:
            argv.append(f"--as={self.memory}")
        return [*argv, "--"]

    def drop_root(self) -> list[str]:
        """setpriv to uid 65534 when the worker is root; nothing otherwise."""
        if not self.as_root:
            return []
        return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


Launch = tuple[list[str], dict[str, str]]  # argv, environment


def bwrap(spec: LaunchSpec) -> Launch:
    size = str(spec.disk)
    argv = ["bwrap", "--unshare-all", "--unshare-user", "--disable-userns"]
    # No --die-with-parent: it ties the sandbox to the *thread* that started it. The kernel
    # ends when its stdin closes instead, and as the namespace's init nothing inside can stop
    # it from noticing.
    argv += ["--new-session", "--as-pid-1", "--cap-drop", "ALL"]
    argv += ["--ro-bind", "/usr", "/usr"]
    for top in ("/lib", "/lib64", "/bin"):
        path = Path(top)
        if path.is_symlink():  # merged /usr: recreate the link rather than bind it
            argv += ["--symlink", os.readlink(path), top]
        elif path.exists():
            argv += ["--ro-bind", top, top]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    for tmpfs in ("/dev/shm", "/tmp", "/work"):
        argv += ["--size", size, "--tmpfs", tmpfs]
    argv += ["--ro-bind", str(spec.kernel_home / "kernel"), f"{INNER_HOME}/kernel"]
    # Only the tmpfs mounts stay writable: / and /dev are RAM-backed and unsized otherwise.
    argv += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/work", "--clearenv"]
    env = {"PATH": "/usr/bin:/bin", "HOME": "/work", "PYTHONDONTWRITEBYTECODE": "1"}
    for name, value in {**env, "PYTHONPATH": INNER_HOME}.items():
        argv += ["--setenv", name, value]
    argv += ["--uid", NOBODY, "--gid", NOBODY, spec.python, "-P", "-m", "kernel"]
    return [*spec.drop_root(), *spec.prlimit(), *argv], {}


def unshare(spec: LaunchSpec) -> Launch:
    namespaces = ["--net", "--pid", "--ipc", "--uts", "--mount", "--fork", "--kill-child"]
    namespaces.append("--mount-proc")
    if spec.as_root:
        inner = [*spec.drop_root(), "--no-new-privs"]
    else:
        namespaces = ["--user", "--map-root-user", *namespaces]
        inner = []
    argv = [*spec.prlimit(), "unshare", *namespaces, *inner, spec.python, "-P", "-m", "kernel"]
    env = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    return argv, {**env, "PYTHONPATH": str(spec.kernel_home)}


LAUNCHERS: dict[str, Callable[[LaunchSpec], Launch]] = {"bwrap": bwrap, "unshare": unshare}

# What a launcher's own words mean, and what to change.
_HINTS = [
    (
        re.compile(r"Can't mount proc on /newroot/proc"),
        "Bubblewrap cannot mount /proc here. Inside a Docker container it needs "
        "`--security-opt systempaths=unconfined` on that container (its /proc is masked "
        "otherwise); or use the docker backend (TASKYARD_SANDBOX_BACKEND=docker).",
    ),
    (
        re.compile(
            r"No permissions to create new namespace|Creating new namespace failed|"
            r"unshare failed: Operation not permitted|setting up uid map"
        ),
        "This machine does not let an unprivileged process create namespaces: allow user "
        "namespaces (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0), "
        "or inside a Docker container run that container with `--security-opt "
        "seccomp=unconfined` (Docker's default profile forbids them); or use the docker "
        "backend (TASKYARD_SANDBOX_BACKEND=docker).",
    ),
    (
        re.compile(r"cgroup\.procs"),
        "The launcher could not join the sandbox's cgroup; set TASKYARD_SANDBOX_CGROUP_PARENT "
        "to a cgroup this worker may write.",
    ),
]


def explain_failure(launcher: str, said: str) -> str:
    """A kernel that did not start, in the launcher's words plus what to do about it."""
    message = f"{launcher} could not start the kernel ({said or 'it said nothing'})."
    hints = [hint for pattern, hint in _HINTS if pattern.search(said)]
    return " ".join([message, *hints])
