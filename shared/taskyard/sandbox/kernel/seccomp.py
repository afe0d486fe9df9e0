"""Process hardening for the kernel: the executor's seccomp filter, and prctl switches.

The filter is a denylist in the spirit of Docker's default profile, written as classic BPF
by hand (no libseccomp in a minimal image): system calls that reach kernel interfaces a
sandboxed interpreter never needs fail with EPERM. It matters most for the namespace backend,
which has no other filter, and it also closes what Docker's profile leaves open to a process
of the same uid (ptrace, process_vm_readv/writev, kcmp: reading the supervisor). Calls of
another ABI (i386 or x32 on x86_64) kill the process: they would bypass the numbers checked.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import struct
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DENIED",
    "build_filter",
    "install_filter",
    "prepare_filter",
    "set_child_subreaper",
    "set_dumpable",
]

# prctl options and seccomp constants (linux/prctl.h, linux/seccomp.h, linux/audit.h).
_PR_SET_DUMPABLE = 4
_PR_SET_SECCOMP = 22
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
_SECCOMP_MODE_FILTER = 2
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000
# BPF opcodes: load word at absolute offset, jumps on constants, return constant.
_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (arg 0's low word, little endian)
# clone() with any of these makes a namespace (user, pid, net, ipc, uts, cgroup, mount).
_CLONE_NAMESPACES = 0x7E020000


@dataclass(frozen=True)
class _Arch:
    audit: int  # AUDIT_ARCH_*
    numbers: dict[str, int]
    x32: bool = False  # x86_64: numbers from 0x40000000 up are the x32 ABI


_X86_64 = _Arch(
    audit=0xC000003E,
    x32=True,
    numbers={
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312,
        "pidfd_getfd": 438, "mount": 165, "umount2": 166, "pivot_root": 155, "open_tree": 428,
        "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "mount_setattr": 442, "unshare": 272, "setns": 308, "keyctl": 250, "add_key": 248,
        "request_key": 249, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "kexec_load": 246, "kexec_file_load": 320, "init_module": 175, "finit_module": 313,
        "delete_module": 176, "reboot": 169, "swapon": 167, "swapoff": 168, "acct": 163,
        "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159,
        "syslog": 103, "quotactl": 179, "quotactl_fd": 443, "open_by_handle_at": 304,
        "name_to_handle_at": 303, "fanotify_init": 300, "lookup_dcookie": 212, "vhangup": 153,
        "iopl": 172, "ioperm": 173, "uselib": 134, "mq_open": 240, "shmget": 29,
        "msgget": 68, "semget": 64, "inotify_init": 253, "inotify_init1": 294,
        "timer_create": 222, "memfd_secret": 447, "clone": 56, "clone3": 435,
    },
)  # fmt: skip
_AARCH64 = _Arch(
    audit=0xC00000B7,
    numbers={
        "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "kcmp": 272,
        "pidfd_getfd": 438, "mount": 40, "umount2": 39, "pivot_root": 41, "open_tree": 428,
        "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "mount_setattr": 442, "unshare": 97, "setns": 268, "keyctl": 219, "add_key": 217,
        "request_key": 218, "bpf": 280, "perf_event_open": 241, "userfaultfd": 282,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "kexec_load": 104, "kexec_file_load": 294, "init_module": 105, "finit_module": 273,
        "delete_module": 106, "reboot": 142, "swapon": 224, "swapoff": 225, "acct": 89,
        "settimeofday": 170, "clock_settime": 112, "clock_adjtime": 266, "adjtimex": 171,
        "syslog": 116, "quotactl": 60, "quotactl_fd": 443, "open_by_handle_at": 265,
        "name_to_handle_at": 264, "fanotify_init": 262, "lookup_dcookie": 18, "vhangup": 58,
        "mq_open": 180, "shmget": 194, "msgget": 186, "semget": 190, "inotify_init1": 26,
        "timer_create": 107, "memfd_secret": 447, "clone": 220, "clone3": 435,
    },
)  # fmt: skip
ARCHES = {"x86_64": _X86_64, "aarch64": _AARCH64}
# Other processes' memory (ptrace ... pidfd_getfd), file systems and namespaces (mount ...
# setns), kernel interfaces with a history of exploits (keyctl ... io_uring), administration,
# and kernel objects counted per user or per IPC namespace rather than per sandbox, which a
# cell could pile up outside its limits or to other sandboxes' cost (mq_open ... memfd_secret:
# each object is made by the one call refused, so the calls that use one need no entry).
# Each arch lists the calls it has; clone is checked by its flags, clone3 answers ENOSYS.
DENIED = sorted((set(_X86_64.numbers) | set(_AARCH64.numbers)) - {"clone", "clone3"})


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def build_filter(machine: str) -> bytes:
    """The filter program for `machine` (``platform.machine()``) as struct sock_filter[]."""
    arch = ARCHES.get(machine)
    if arch is None:
        raise OSError(errno.ENOSYS, f"no seccomp filter for machine {machine!r}")
    checks = [(_JGE, 0x40000000)] if arch.x32 else []
    checks += [(_JEQ, arch.numbers[name]) for name in DENIED if name in arch.numbers]
    n = len(checks)
    # Layout: 4 head, n checks, clone3, clone, load arg0, jset, ALLOW (8+n), DENY, ENOSYS.
    program = [
        _op(_LD_ABS, _ARCH),
        _op(_JEQ, arch.audit, jt=1),
        _op(_RET, _RET_KILL_PROCESS),
        _op(_LD_ABS, _NR),
        *(_op(code, k, jt=4 + n - i) for i, (code, k) in enumerate(checks)),
        _op(_JEQ, arch.numbers["clone3"], jt=5),  # ENOSYS: glibc falls back to clone
        _op(_JEQ, arch.numbers["clone"], jf=2),
        _op(_LD_ABS, _ARG0),
        _op(_JSET, _CLONE_NAMESPACES, jt=1),
        _op(_RET, _RET_ALLOW),
        _op(_RET, _RET_ERRNO | errno.EPERM),
        _op(_RET, _RET_ERRNO | errno.ENOSYS),
    ]
    return b"".join(program)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


# Resolved once, at import: in a fork server, before the forks.
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl


def _prctl(option: int, *args: Any) -> None:
    if _PRCTL(option, *args, *[0] * (4 - len(args))) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"prctl({option}): {os.strerror(code)}")


@functools.cache
def prepare_filter() -> tuple[ctypes.Array[ctypes.c_char], _SockFprog]:
    """This machine's filter program, built once: a fork server builds it before forking, so
    that each session only installs it (building it there would write to pages every session
    otherwise shares). The buffer is returned too: the struct points into it."""
    program = build_filter(platform.machine())
    buffer = ctypes.create_string_buffer(program, len(program))
    return buffer, _SockFprog(len(program) // 8, ctypes.addressof(buffer))


def install_filter() -> None:
    """Apply the filter to this process and every process it starts, for good."""
    _, fprog = prepare_filter()
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)  # required to install a filter without privileges
    _prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog))


def set_dumpable(dumpable: bool) -> None:
    _prctl(_PR_SET_DUMPABLE, int(dumpable))


def set_child_subreaper() -> None:
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
