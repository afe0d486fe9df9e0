"""A fork server's sessions' memory, each session as a whole: its executor and every process
below it (the executor is the init of the session's pid namespace, so nothing of the session
escapes its tree), found in the container's /proc by parent links.

Counted in proportional set size (anonymous and shared-memory pages): a page mapped by n
processes counts 1/n in each, so what a session shares copy-on-write with the fork server and
its siblings (the preloaded numpy and pandas) counts only a fraction against it, and what its
own processes share among themselves (a pool's workers) counts once in all. Reading that
(smaps_rollup) walks a process's page tables, so a session is read that way only when the
kernel's resident counters (`/proc/<pid>/status`, an upper bound of it) say it might be over.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from .processes import descendants

__all__ = ["MemoryWatch", "proportional", "resident"]

_KIB = 1024
_RESIDENT = ("RssAnon:", "RssShmem:")  # /proc/<pid>/status
_PROPORTIONAL = ("Pss_Anon:", "Pss_Shmem:")  # /proc/<pid>/smaps_rollup
# A sample's cost (the CPU time it took, not the wall time, which a busy machine stretches)
# over the interval before the next one: the supervisor spends at most this share of a core
# reading memory, however many sessions and processes there are.
_COST_SHARE = 0.02
# The interval is how long a session may hold more than its share (each of its processes
# within its address space limit meanwhile): never shorter than this, nor longer than that.
_INTERVAL_MIN_S = 0.1
_INTERVAL_MAX_S = 1.0


def _kib_sum(path: str, names: tuple[str, ...]) -> int | None:
    """The sum of `names`' kB lines in `path`, in bytes; None if it cannot be read."""
    try:
        with open(path) as file:
            lines = file.readlines()
    except PermissionError:
        return None
    except OSError:  # gone, or a zombie's
        return 0
    return sum(int(line.split()[1]) for line in lines if line.startswith(names)) * _KIB


def resident(pid: int) -> int:
    """Bytes of anonymous and shared memory `pid` has resident, its shared pages in full:
    counters the kernel keeps, readable without ptrace rights. 0 once it is gone."""
    return _kib_sum(f"/proc/{pid}/status", _RESIDENT) or 0


def proportional(pid: int) -> int:
    """`pid`'s proportional share of the anonymous and shared memory it maps; 0 once it is
    gone. A process that made itself undumpable may refuse that to the supervisor: it then
    counts in full (`resident`)."""
    shared = _kib_sum(f"/proc/{pid}/smaps_rollup", _PROPORTIONAL)
    return resident(pid) if shared is None else shared


class MemoryWatch:
    """Which sessions hold more than their share, sampled at an interval that adapts to what a
    sample costs."""

    def __init__(self, share: int) -> None:
        self.share = share
        self.interval_s = _INTERVAL_MIN_S
        self._next = 0.0

    def wait_s(self) -> float:
        """Seconds until the next sample is due."""
        return max(0.0, self._next - time.monotonic())

    def over(self, sessions: Mapping[Any, tuple[int, int]]) -> dict[Any, int]:
        """Sessions (key -> executor pid, its proportional size when it was ready) over their
        share, with the bytes each uses; {} when no sample is due."""
        if time.monotonic() < self._next:
            return {}
        started = time.thread_time()
        trees = descendants(executor for executor, _ in sessions.values())
        found = {}
        for key, (executor, baseline) in sessions.items():
            used = self._used([executor, *trees[executor]], baseline)
            if used > self.share:
                found[key] = used
        cost = time.thread_time() - started
        self.interval_s = min(max(cost / _COST_SHARE, _INTERVAL_MIN_S), _INTERVAL_MAX_S)
        self._next = time.monotonic() + self.interval_s
        return found

    def _used(self, processes: Iterable[int], baseline: int) -> int:
        """Bytes a session's processes hold above `baseline`; only an upper bound of that
        when it is within the share."""
        pids = list(processes)
        upper = sum(resident(pid) for pid in pids) - baseline
        if upper <= self.share:
            return upper  # proportional sizes are at most these: no need to walk page tables
        return sum(proportional(pid) for pid in pids) - baseline
