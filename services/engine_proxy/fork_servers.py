"""The one seccomp profile a sandbox may bring: a fork server's (many sessions per container,
`taskyard.sandbox.docker.spec.fork_server_profile`). It lets the fork server make each
session's namespaces and mounts, which Docker's default profile refuses, so the proxy checks
that it denies at least every call a sandbox's kernel filter denies but those two; a profile
that allows more, by a default, an argument filter or a missing name, is refused.

Written here, not imported: the proxy imports none of the sandbox's code (a test keeps this
list equal to the kernel filter's).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["FORK_SERVER_PIDS", "MUST_DENY", "fork_server_profile_problems", "forks"]

FORK_SERVER_PIDS = 16  # the supervisor, the fork server and a session being forked
MUST_DENY = frozenset({
    "acct", "add_key", "adjtimex", "bpf", "clock_adjtime", "clock_settime", "delete_module",
    "fanotify_init", "finit_module", "fsconfig", "fsmount", "fsopen", "fspick",
    "init_module", "inotify_init", "inotify_init1", "io_uring_enter", "io_uring_register",
    "io_uring_setup", "ioperm", "iopl", "kcmp", "kexec_file_load", "kexec_load", "keyctl",
    "lookup_dcookie", "memfd_secret", "mount_setattr", "move_mount", "mq_open", "msgget",
    "name_to_handle_at", "open_by_handle_at", "open_tree", "perf_event_open", "pidfd_getfd",
    "pivot_root", "process_vm_readv", "process_vm_writev", "ptrace", "quotactl", "quotactl_fd",
    "reboot", "request_key", "semget", "setns", "settimeofday", "shmget", "swapoff", "swapon",
    "syslog", "timer_create", "umount2", "userfaultfd", "uselib", "vhangup",
})  # fmt: skip
_KEYS = frozenset({"defaultAction", "architectures", "syscalls"})
_RULE_KEYS = frozenset({"names", "action", "errnoRet"})


def forks(options: list[str]) -> bool:
    """Whether the container brings a seccomp profile (a fork server's, once checked)."""
    return any(option.startswith("seccomp=") for option in options)


def fork_server_profile_problems(options: list[str]) -> list[str]:
    """What is wrong with the seccomp profiles among `options` (none: nothing)."""
    profiles = [option.removeprefix("seccomp=") for option in options if forks([option])]
    if len(profiles) > 1:
        return ["HostConfig.SecurityOpt may hold one seccomp profile"]
    if not profiles:
        return []
    try:
        profile: Any = json.loads(profiles[0])
    except ValueError:
        return ["HostConfig.SecurityOpt's seccomp profile must be JSON (not a name or a path)"]
    return _profile_problems(profile)


def _profile_problems(profile: Any) -> list[str]:
    wrong = "HostConfig.SecurityOpt's seccomp profile must be a fork server's"
    if not isinstance(profile, dict) or set(profile) - _KEYS:
        return [f"{wrong}: defaultAction, architectures and one rule, nothing else"]
    rules = profile.get("syscalls")
    if profile.get("defaultAction") != "SCMP_ACT_ALLOW" or not isinstance(rules, list):
        return [f"{wrong}: SCMP_ACT_ALLOW by default, one denying rule"]
    if len(rules) != 1 or not isinstance(rules[0], dict) or set(rules[0]) - _RULE_KEYS:
        return [f"{wrong}: exactly one rule, with no argument filter"]
    rule = rules[0]
    if rule.get("action") != "SCMP_ACT_ERRNO" or not isinstance(rule.get("names"), list):
        return [f"{wrong}: its rule must make the calls fail (SCMP_ACT_ERRNO)"]
    missing = sorted(MUST_DENY - set(rule["names"]))
    if missing:
        return [f"{wrong}: it must deny {', '.join(missing)}"]
    return []
