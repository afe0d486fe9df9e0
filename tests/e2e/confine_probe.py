"""What a compromised tool worker would try, run through `devstack.confine` with a worker's
environment: prints, as JSON, what it is and what each attempt gave."""

from __future__ import annotations

import errno
import json
import os
import socket
import sys
from pathlib import Path

import httpx

_ENGINE_SOCKETS = ("/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock")
_WRITES = ("/etc/confine-probe", "/tmp/probe")
_STATUS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs")


def _name(exc: OSError) -> str:
    return errno.errorcode.get(exc.errno or 0, type(exc).__name__)


def _connect(path: str) -> str:
    """'connected', or the error's name (ENOENT, ...)."""
    with socket.socket(socket.AF_UNIX) as sock:
        try:
            sock.connect(path)
        except OSError as exc:
            return _name(exc)
    return "connected"


def _write(path: str) -> str:
    try:
        Path(path).write_text("x")
    except OSError as exc:
        return _name(exc)
    return "written"


def _read(path: str) -> str:
    try:
        Path(path).read_bytes()
    except OSError as exc:
        return _name(exc)
    return "read"


def _proxy(path: str) -> int:
    """The engine proxy's status for GET `path`, asked as the worker asks it."""
    base = os.environ["DOCKER_HOST"].replace("tcp://", "http://")
    token = {"X-Taskyard-Engine-Token": os.environ["TASKYARD_SANDBOX_ENGINE_TOKEN"]}
    return httpx.get(f"{base}{path}", headers=token, timeout=10).status_code


def _signal(pid: int) -> str:
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return _name(exc)
    return "signalled"


def main(stack_pid: str, checkout: str, *others: str) -> None:
    """`others`: pids of processes whose environments hold engine tokens (the worker, the
    engine proxy)."""
    lines = Path("/proc/self/status").read_text().splitlines()
    status = dict(line.split(":\t", 1) for line in lines)
    sockets = [*_ENGINE_SOCKETS]
    sockets += [f"/proc/{pid}/root{path}" for pid in ("1", stack_pid) for path in _ENGINE_SOCKETS]
    report = {
        "uid": os.getresuid(),
        "groups": os.getgroups(),
        "status": {name: status[name].strip() for name in _STATUS},
        "sockets": {path: _connect(path) for path in sockets},
        "writes": {path: _write(path) for path in (*_WRITES, f"{checkout}/probe")},
        "environs": {pid: _read(f"/proc/{pid}/environ") for pid in others},
        "signals": {pid: _signal(int(pid)) for pid in others},
        "proxy": {path: _proxy(path) for path in ("/containers/json", "/images/json")},
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main(*sys.argv[1:])
