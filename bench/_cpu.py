"""CPU time per task of each process of a running local stack, from /proc.

A service's CPU is its process's and every descendant's (utime + stime, and the children's
that ended: cutime + cstime), so a sandbox kernel counts toward its tool worker.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cpu_s", "main_thread_cpu_s", "switches", "tree_cpu_s"]

_TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return text[text.rindex(")") + 2 :].split()  # fields from the 3rd on (name may hold spaces)


def cpu_s(pid: int) -> float:
    """The process's CPU seconds, its ended children's included."""
    fields = _stat(pid)
    if fields is None:
        return 0.0
    return sum(int(value) for value in fields[11:15]) * _TICK_S  # utime stime cutime cstime


def main_thread_cpu_s(pid: int) -> float:
    """The CPU seconds of the process's main thread alone (utime + stime)."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) * _TICK_S


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids += [int(p) for p in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return kids


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of `pid` and all its live descendants (and what their ended children
    used)."""
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        total += cpu_s(current)
        todo += _children(current)
    return total


def switches(pid: int) -> int:
    """Context switches of the process's live threads so far, voluntary (it waited: each one
    is a later wake-up) and not (preempted)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            status = (task / "status").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        fields = (line.partition(":") for line in status.splitlines())
        total += sum(int(value) for name, _, value in fields if name.endswith("ctxt_switches"))
    return total
