"""A Redis primary, its replica and three sentinels (`devstack.sentinel`) as processes of a
test's own, for the tests of failover: the `redis_group` fixture (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from devstack import redis_server
from devstack.procs import Processes, free_port
from devstack.redis_server import start as start_redis
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
        start_redis(processes, "redis", port, run_dir)
        for name, argv in group.commands(redis_server.argv).items():
            processes.start(name, argv)
        for name in group.names:
            group.wait_ready(name, processes[name])
        yield RedisGroup(url, group, processes)
