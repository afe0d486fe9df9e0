"""One redis-server: its command line and waiting until it answers. The local stack, the
Sentinel group and the tests' own servers all start Redis through here."""

from __future__ import annotations

import shutil
from pathlib import Path

import redis

from devstack.procs import Child, Processes

__all__ = ["LOOPBACK", "argv", "binary", "start", "wait_answering"]

_LISTENING = "Ready to accept connections"  # logged once its port is bound and its data loaded

LOOPBACK = "127.0.0.1"


def binary() -> str:
    """The redis-server on PATH; `make deps` installs it."""
    path = shutil.which("redis-server")
    if path is None:
        raise RuntimeError("redis-server not found: run `make deps` (apt-get install redis-server)")
    return path


def argv(
    port: int, data_dir: Path, bind: str = LOOPBACK, appendfsync: str | None = None
) -> list[str]:
    """A server on `port` keeping its files in `data_dir`: with `appendfsync` ("everysec" or
    "always") its writes go to an append-only file; without, it keeps nothing on disk."""
    durable = ["--appendonly", "no"]
    if appendfsync:
        durable = ["--appendonly", "yes", "--appendfsync", appendfsync]
    # Its address is the guard: protected mode would refuse every other host.
    return [binary(), "--port", str(port), "--bind", bind, "--dir", str(data_dir),
            "--save", "", "--protected-mode", "no", *durable]  # fmt: skip


def wait_answering(child: Child, port: int, host: str = LOOPBACK) -> None:
    """Until the server on `port` answers PING (or `child` exits). Its own line first: any
    Redis already on the port would answer, and a server that could not bind it exits."""
    child.wait_log(_LISTENING, after=child.log_start)
    with redis.Redis(host=host, port=port, socket_timeout=2) as client:
        child.wait_until(lambda: _pings(client), f"PING answered on {host}:{port}")


def start(processes: Processes, name: str, port: int, data_dir: Path) -> Child:
    """A loopback server that keeps nothing on disk, started as child `name`, once it answers."""
    data_dir.mkdir(parents=True, exist_ok=True)
    child = processes.start(name, argv(port, data_dir))
    wait_answering(child, port)
    return child


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except (redis.ConnectionError, redis.TimeoutError):
        return False
