"""The processes below the supervisor, or below a session's executor: found in /proc, and
stopped all at once.

The supervisor is the sandbox's PID 1 (or a child subreaper), so every process a cell starts,
forked or orphaned, is its descendant; a session of a fork server has its executor as the init
of its pid namespace, so every process of the session is the executor's. Stopping them needs
no cooperation from any of them.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterable
from pathlib import Path

__all__ = ["collected", "descendants", "inner_pids", "stop_tree"]


def collected(pids: Iterable[int]) -> set[int]:
    """Those of `pids` (children of ours) that ended and are collected now, or were before (by
    anyone: user code may wait for them too). Never waits."""
    done = set()
    for pid in pids:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == 0:
                continue
        except ChildProcessError:
            pass
        done.add(pid)
    return done


def _stat(pid: str) -> tuple[int, str] | None:
    """(parent pid, state) of a process, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) "; comm may hold spaces
    return int(fields[1]), fields[0]


def descendants(roots: Iterable[int]) -> dict[int, set[int]]:
    """Live (not zombie) processes below each of `roots`, from one read of /proc."""
    children: dict[int, list[int]] = {}
    alive: set[int] = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(entry)) is not None:
            children.setdefault(stat[0], []).append(int(entry))
            if stat[1] != "Z":
                alive.add(int(entry))
    found: dict[int, set[int]] = {}
    for root in roots:
        below, todo = set(), [root]
        while todo:
            for child in children.get(todo.pop(), []):
                below.add(child)
                todo.append(child)
        found[root] = below & alive
    return found


def inner_pids(pids: Iterable[int]) -> list[int]:
    """Each process's pid as its own (innermost) pid namespace names it, for those not yet
    reaped; a zombie still says it. A kernel that writes no NSpid line (gVisor) has one pid
    namespace here: the pid is the same."""
    inner = []
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        nspid = [line for line in status.splitlines() if line.startswith("NSpid:")]
        inner.append(int(nspid[0].split()[-1]) if nspid else pid)
    return inner


def stop_tree(keep: int, root: int | None = None) -> set[int]:
    """SIGKILL every process below `root` (this one by default) except `keep` (not its
    children); their pids.

    Repeated until none is left, so processes forking meanwhile are caught too.
    """
    top = os.getpid() if root is None else root
    killed: set[int] = set()
    for _ in range(100):
        victims = descendants([top])[top] - {keep}
        if not victims:
            break
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        killed |= victims
    return killed
