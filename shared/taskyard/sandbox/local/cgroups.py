"""Per-sandbox cgroups for the local backend: memory (swap included), processes and CPU,
counted per sandbox, whatever uid runs it.

cgroup v2 where the parent cgroup offers the memory, pids and cpu controllers and lets us
enable them for children; else the v1 hierarchies of those three controllers (hybrid hosts
keep them there); else none, and the provider says what is then not enforced. The parent is
`settings.sandbox_cgroup_parent`, or the worker's own cgroup, so sandboxes stay inside
whatever limits the worker itself runs under. Writing there needs root or a delegated subtree.

A sandbox joins its cgroup before the launcher starts: a tiny shell writes its own pid into
each ``cgroup.procs`` and then execs the launcher, so nothing runs outside the cgroup.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CgroupLimits", "CgroupTree", "SandboxCgroup", "find_cgroups"]

CONTROLLERS = ("memory", "pids", "cpu")
_CPU_PERIOD_US = 100_000
_JOIN = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True)
class CgroupLimits:
    memory: int  # bytes, swap included
    pids: int
    cpus: float


class SandboxCgroup:
    """One sandbox's cgroup: one directory (v2), or one per controller (v1)."""

    def __init__(self, dirs: dict[str, Path]) -> None:
        self.dirs = dirs  # controller ("" for v2) -> directory

    def join_argv(self) -> list[str]:
        """An argv prefix that moves itself into this cgroup, then execs the rest."""
        procs = sorted({str(d / "cgroup.procs") for d in self.dirs.values()})
        return ["/bin/sh", "-c", _JOIN, "join-cgroup", *procs, "--"]

    def oom_kills(self) -> int:
        """How many processes the kernel killed here for want of memory."""
        memory = self.dirs.get("memory") or self.dirs[""]
        for name in ("memory.events", "memory.oom_control"):  # v2, v1
            with contextlib.suppress(OSError):
                for line in (memory / name).read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        return 0

    def pids(self) -> set[int]:
        found: set[int] = set()
        for directory in self.dirs.values():
            with contextlib.suppress(OSError):
                found.update(int(p) for p in (directory / "cgroup.procs").read_text().split())
        return found

    def remove(self) -> None:
        """Kill whatever still runs here, then remove the directories (best effort)."""
        deadline = time.monotonic() + 2.0
        while (pids := self.pids()) and time.monotonic() < deadline:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)
        for directory in set(self.dirs.values()):
            while True:
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # EBUSY while killed processes are still being torn down
                    if time.monotonic() > deadline:
                        break  # left for `remove_stale` at the next start
                    time.sleep(0.01)


class CgroupTree:
    """Where sandbox cgroups are made, and how their limits are written."""

    def __init__(self, version: int, parents: dict[str, Path]) -> None:
        self.version = version
        self.parents = parents  # controller ("" for v2) -> parent directory

    def create(self, name: str, limits: CgroupLimits) -> SandboxCgroup:
        """A new cgroup `name` with `limits`; raises OSError when the tree refuses."""
        cgroup = SandboxCgroup({c: p / name for c, p in self.parents.items()})
        try:
            for directory in set(cgroup.dirs.values()):
                directory.mkdir()
            self._write_limits(cgroup, limits)
        except BaseException:
            cgroup.remove()  # no half-made cgroup stays behind
            raise
        return cgroup

    def remove_stale(self, stale: Callable[[str], bool]) -> int:
        """Remove the cgroups whose names `stale` picks, with what still runs in them; how many."""
        names = {
            child.name
            for parent in self.parents.values()
            for child in parent.iterdir()
            if child.is_dir() and stale(child.name)
        }
        for name in names:
            SandboxCgroup({c: p / name for c, p in self.parents.items()}).remove()
        return len(names)

    def _write_limits(self, cgroup: SandboxCgroup, limits: CgroupLimits) -> None:
        quota = max(1000, int(limits.cpus * _CPU_PERIOD_US))
        if self.version == 2:
            files = {
                "memory.max": limits.memory,
                "memory.swap.max": 0,
                "pids.max": limits.pids,
                "cpu.max": f"{quota} {_CPU_PERIOD_US}",
            }
            directory = cgroup.dirs[""]
            for name, value in files.items():
                if name != "memory.swap.max" or (directory / name).exists():  # no swap, no file
                    (directory / name).write_text(str(value))
            return
        memory = cgroup.dirs["memory"]
        (memory / "memory.limit_in_bytes").write_text(str(limits.memory))
        if (memory / "memory.memsw.limit_in_bytes").exists():  # only with swap accounting
            (memory / "memory.memsw.limit_in_bytes").write_text(str(limits.memory))
        (cgroup.dirs["pids"] / "pids.max").write_text(str(limits.pids))
        (cgroup.dirs["cpu"] / "cpu.cfs_period_us").write_text(str(_CPU_PERIOD_US))
        (cgroup.dirs["cpu"] / "cpu.cfs_quota_us").write_text(str(quota))


def safe_name(text: str) -> str:
    """`text` usable as a cgroup directory name."""
    return _UNSAFE.sub("_", text)[:64] or "_"


def find_cgroups(parent: str = "") -> tuple[CgroupTree | None, str]:
    """The tree to make sandbox cgroups in, or None and why there is none."""
    mounts = _cgroup_mounts()
    own = _own_cgroups()
    reasons = []
    for version, probe in ((2, _v2_tree), (1, _v1_tree)):
        try:
            return probe(mounts, own, parent), ""
        except (OSError, LookupError) as exc:
            reasons.append(f"v{version}: {exc}")
    return None, "; ".join(reasons)


def _cgroup_mounts() -> list[_Mount]:
    """(mount point, root in the hierarchy, fs type, super options) of each cgroup mount."""
    mounts = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        before, _, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if tail and tail[0] in ("cgroup", "cgroup2"):
            mounts.append((fields[4], fields[3], tail[0], set(tail[2].split(","))))
    return mounts


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup path per v1 controller, and under "" for v2."""
    own = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            own[controller] = path
    return own


def _under(mount: str, root: str, path: str) -> Path:
    relative = path[len(root) :] if root != "/" and path.startswith(root) else path
    return Path(mount) / relative.lstrip("/")


def _probe(directory: Path) -> None:
    """Raise OSError unless a child cgroup can be made here."""
    probe = directory / f"taskyard-probe-{uuid.uuid4().hex}"
    probe.mkdir()
    probe.rmdir()


_Mount = tuple[str, str, str, set[str]]


def _mount(mounts: list[_Mount], fstype: str, controller: str = "") -> _Mount:
    for mount in mounts:
        if mount[2] == fstype and (not controller or controller in mount[3]):
            return mount
    raise LookupError(f"no {fstype} mount{' with ' + controller if controller else ''}")


def _v2_tree(mounts: list[_Mount], own: dict[str, str], parent: str) -> CgroupTree:
    mount, root, _, _ = _mount(mounts, "cgroup2")
    directory = _under(mount, root, parent or own[""])
    offered = set((directory / "cgroup.controllers").read_text().split())
    missing = [c for c in CONTROLLERS if c not in offered]
    if missing:
        raise LookupError(f"{directory} offers no {', '.join(missing)} controller")
    enabled = set((directory / "cgroup.subtree_control").read_text().split())
    if not set(CONTROLLERS) <= enabled:
        # Fails (EBUSY) where processes live in `directory` itself: then name a parent.
        (directory / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in CONTROLLERS))
    _probe(directory)
    return CgroupTree(2, {"": directory})


def _v1_tree(mounts: list[_Mount], own: dict[str, str], parent: str) -> CgroupTree:
    parents = {}
    for controller in CONTROLLERS:
        mount, root, _, _ = _mount(mounts, "cgroup", controller)
        parents[controller] = _under(mount, root, parent or own[controller])
        _probe(parents[controller])
    return CgroupTree(1, parents)
