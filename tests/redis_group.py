"""A Redis primary, its replica and three sentinels (`devstack.sentinel`) as processes of a
test's own, for the tests of failover: the `redis_group` fixture (tests/conftest.py)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import redis

from devstack.procs import Processes, free_port
from devstack.sentinel import SentinelGroup

__all__ = ["RedisGroup", "start_redis_group"]


@dataclass(frozen=True)
class RedisGroup:
    """The primary's URL, the group (replica and sentinel ports, the master's name) and the
    processes, by name: "redis", "redis_replica", "sentinel_1"..."""

    primary_url: str
    sentinels: SentinelGroup
    processes: Processes


@contextmanager
def start_redis_group(run_dir: Path) -> Iterator[RedisGroup]:
    """Start them and wait until each is ready; stop them all on exit."""
    port = free_port()
    group = SentinelGroup(run_dir, port)
    url = f"redis://127.0.0.1:{port}"
    with Processes(log_dir=run_dir) as processes:
        primary = processes.start("redis", _server(port, run_dir))
        for name, argv in group.commands(_server).items():
            processes.start(name, argv)
        with redis.Redis.from_url(url, socket_timeout=2) as client:
            primary.wait_until(lambda: _pings(client), f"PING answered on {url}")
        for name in group.names:
            group.wait_ready(name, processes[name])
        yield RedisGroup(url, group, processes)


def _server(port: int, data_dir: Path) -> list[str]:
    return [shutil.which("redis-server") or "redis-server", "--port", str(port),
            "--bind", "127.0.0.1", "--dir", str(data_dir), "--save", "",
            "--appendonly", "no"]  # fmt: skip


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False
