"""Per-sandbox cgroups: made, joined, limited and removed on this machine's real hierarchy."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

from waiting import wait_until

from taskyard.sandbox.local.cgroups import CgroupLimits, CgroupTree, _v2_tree, find_cgroups


def _tree() -> CgroupTree:
    tree, why_not = find_cgroups()
    assert tree is not None, f"these tests need writable cgroups, as `make test` has: {why_not}"
    return tree


def test_a_sandbox_cgroup_holds_its_limits_and_its_processes() -> None:
    tree = _tree()
    cgroup = tree.create(f"taskyard-test-{uuid.uuid4().hex[:8]}", CgroupLimits(64 << 20, 12, 0.5))
    try:
        argv = [*cgroup.join_argv(), "cat", "/proc/self/cgroup"]
        joined = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
        names = {d.name for d in cgroup.dirs.values()}
        assert all(any(line.endswith(name) for line in joined.splitlines()) for name in names)
        if tree.version == 1:
            memory, pids = cgroup.dirs["memory"], cgroup.dirs["pids"]
            assert (memory / "memory.limit_in_bytes").read_text().strip() == str(64 << 20)
            assert (pids / "pids.max").read_text().strip() == "12"
            assert (cgroup.dirs["cpu"] / "cpu.cfs_quota_us").read_text().strip() == "50000"
        else:
            assert (cgroup.dirs[""] / "pids.max").read_text().strip() == "12"
        sleeper = subprocess.Popen([*cgroup.join_argv(), "sleep", "60"])
        wait_until(lambda: bool(cgroup.pids()), "its processes", timeout=5)
    finally:
        cgroup.remove()
    assert sleeper.wait(timeout=5) == -9  # removing a cgroup stops what still runs in it
    assert not any(d.exists() for d in cgroup.dirs.values())


def test_cgroup_v2_files_on_a_stand_in_tree(tmp_path: Path) -> None:
    # These machines have cgroup v1 controllers, so v2 cannot run here; this checks, on a plain
    # directory standing in for /sys/fs/cgroup, which files the v2 path writes.
    parent = tmp_path / "worker.slice"
    parent.mkdir()
    (parent / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (parent / "cgroup.subtree_control").write_text("")
    tree = _v2_tree([(str(tmp_path), "/", "cgroup2", {"rw"})], {"": "/worker.slice"}, "")
    assert (parent / "cgroup.subtree_control").read_text() == "+memory +pids +cpu"
    cgroup = tree.create("taskyard-x-1", CgroupLimits(128 << 20, 10, 0.5))
    made = parent / "taskyard-x-1"
    written = {name: (made / name).read_text() for name in ("memory.max", "pids.max", "cpu.max")}
    assert written == {"memory.max": str(128 << 20), "pids.max": "10", "cpu.max": "50000 100000"}
    assert cgroup.join_argv()[-2:] == [str(made / "cgroup.procs"), "--"]
