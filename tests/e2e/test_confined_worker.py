"""The local stack's tool worker as a compromised one would find itself (`devstack.confine`):
not root, no capabilities, no_new_privs, no engine socket by any path, the tokens of another
worker and of the engine proxy out of reach; and the engine proxy still answering it, so the
stack's tasks run (test_demo)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from devstack.confine import UID_BASE, confined_argv
from devstack.procs import ROOT
from devstack.stack import LocalStack

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.geteuid() != 0, reason="the launcher needs root"),
]

PROBE = Path(__file__).resolve().parent / "confine_probe.py"
_ZERO = "0" * 16


def _status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {name: value.strip() for name, value in (line.split(":\t", 1) for line in lines)}


def _mounts(pid: int) -> dict[str, str]:
    """Mount point to file system type, in `pid`'s mount namespace (the last mount on a point
    is the one seen)."""
    mounts = {}
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        fields, after = line.split(" - ", 1)
        mounts[fields.split()[4]] = after.split()[0]
    return mounts


def _environ(pid: int) -> dict[str, str]:
    entries = Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0")
    return dict(entry.split("=", 1) for entry in entries if "=" in entry)


def test_the_tool_worker_runs_confined(stack: LocalStack) -> None:
    pid = stack.procs["tool_worker"].pid
    status = _status(pid)
    assert status["Uid"].split() == [str(UID_BASE + pid)] * 4
    assert status["Gid"].split() == [str(UID_BASE + pid)] * 4
    assert status["Groups"] == ""
    assert {status[cap] for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")} == {_ZERO}
    assert status["NoNewPrivs"] == "1"
    mounts = _mounts(pid)
    assert mounts["/run"] == "tmpfs" and mounts["/tmp"] == "tmpfs"
    assert os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
    assert _environ(pid)["DOCKER_HOST"].startswith("tcp://127.0.0.1:")


def test_a_compromised_worker_reaches_no_engine_socket(stack: LocalStack) -> None:
    worker, proxy = stack.procs["tool_worker"].pid, stack.procs["engine_proxy"].pid
    others = [str(worker), str(proxy)]  # their environments hold engine tokens
    argv = confined_argv([sys.executable, str(PROBE), str(os.getpid()), str(ROOT), *others])
    done = subprocess.run(argv, env=_environ(worker), cwd=ROOT, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    report = json.loads(done.stdout)
    assert report["uid"][0] != 0 and report["groups"] == []
    assert report["status"] == {
        **dict.fromkeys(("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"), _ZERO),
        "NoNewPrivs": "1",
    }
    # /run is a fresh tmpfs; through another process's root, /proc refuses a stranger.
    for path, outcome in report["sockets"].items():
        expected = "EACCES" if path.startswith("/proc/") else "ENOENT"
        assert outcome == expected, path
    writes = report["writes"]
    assert writes["/etc/confine-probe"] == "EACCES" and writes["/tmp/probe"] == "written"
    assert writes[f"{ROOT}/probe"] in {"EACCES", "EROFS"}  # EROFS: bound read-only under /root
    assert report["environs"] == dict.fromkeys(others, "EACCES")  # their tokens
    assert report["signals"] == dict.fromkeys(others, "EPERM")
    assert report["proxy"] == {"/containers/json": 200, "/images/json": 403}
