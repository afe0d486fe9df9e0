"""Redis Sentinel for the local stack: a replica of the stack's Redis and three sentinels that
monitor it, on loopback ports of their own, so that a test or a benchmark can SIGKILL the
primary and see Sentinel promote the replica (`LocalStack(redis_sentinel=True)`).

Failover is quick on purpose: a primary silent for `DOWN_AFTER_MS` is down, and two of the
three sentinels agreeing starts the failover; measured here, the replica is the master about
1.5 s after the primary's SIGKILL. A killed primary started again comes back as it was (a
primary of its own old data) until the sentinels turn it into a replica of the new master,
which they do after it has been up for about 8 s (their guard against flapping); its old
data is replaced by the new master's.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import redis

from devstack.procs import Child, ChildFailed, free_port
from taskyard.plumbing.redis_clients import SentinelSpec

__all__ = ["MASTER_NAME", "SentinelGroup"]

MASTER_NAME = "taskyard"
QUORUM = 2
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 3000
_HOST = "127.0.0.1"
REPLICA = "redis_replica"  # the replica's process name in the stack


@dataclass
class SentinelGroup:
    """The replica and the sentinels of the primary on `primary_port`; their settings for
    the services (`env`), their command lines (`commands`) and what to wait for."""

    run_dir: Path
    primary_port: int
    replica_port: int = field(default_factory=free_port)
    sentinel_ports: tuple[int, ...] = field(
        default_factory=lambda: tuple(free_port() for _ in range(3))
    )

    @property
    def names(self) -> list[str]:
        """The process names: the replica, then the sentinels."""
        return [REPLICA, *(f"sentinel_{i}" for i in range(1, len(self.sentinel_ports) + 1))]

    @property
    def spec(self) -> SentinelSpec:
        """The sentinels and the master's name, as the services' settings give them."""
        return SentinelSpec(tuple((_HOST, port) for port in self.sentinel_ports), MASTER_NAME)

    def env(self) -> dict[str, str]:
        """What every service is given: the sentinels and the master's name."""
        addresses = ",".join(f"{_HOST}:{port}" for port in self.sentinel_ports)
        return {"TASKYARD_REDIS_SENTINELS": addresses, "TASKYARD_REDIS_MASTER": MASTER_NAME}

    def commands(self, server: Callable[[int, Path], list[str]]) -> dict[str, list[str]]:
        """The replica (`server` gives a Redis's command line for a port and a data
        directory) and each sentinel, with its config file written in the run directory."""
        data = self.run_dir / REPLICA
        data.mkdir(parents=True, exist_ok=True)
        replica = [*server(self.replica_port, data), "--replicaof", _HOST, str(self.primary_port)]
        commands = {REPLICA: replica}
        for name, port in zip(self.names[1:], self.sentinel_ports, strict=True):
            commands[name] = [_sentinel_binary(), str(self._write_config(name, port))]
        return commands

    def _write_config(self, name: str, port: int) -> Path:
        """A sentinel's config file: Sentinel rewrites it as it learns (replicas, peers,
        failovers), so each has its own."""
        path = self.run_dir / f"{name}.conf"
        path.write_text(
            f"port {port}\nbind {_HOST}\ndir {self.run_dir}\n"
            f"sentinel monitor {MASTER_NAME} {_HOST} {self.primary_port} {QUORUM}\n"
            f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {MASTER_NAME} {FAILOVER_TIMEOUT_MS}\n"
            f"sentinel parallel-syncs {MASTER_NAME} 1\n"
        )
        return path

    def wait_ready(self, name: str, child: Child) -> None:
        """The replica: until its link to the primary is up. A sentinel: until it knows the
        replica and every other sentinel (before that it could not agree to a failover)."""
        if name == REPLICA:
            check, what = self._replica_synced, "replica linked to its primary"
        else:
            port = self.sentinel_ports[self.names.index(name) - 1]
            check, what = (lambda: self._sentinel_knows_all(port)), "sentinel knows its peers"
        child.wait_until(_answering(check), what)

    def _replica_synced(self) -> bool:
        with redis.Redis(host=_HOST, port=self.replica_port, socket_timeout=2) as client:
            return bool(client.info("replication").get("master_link_status") == "up")

    def _sentinel_knows_all(self, port: int) -> bool:
        with redis.Redis(host=_HOST, port=port, socket_timeout=2, decode_responses=True) as c:
            state = c.sentinel_master(MASTER_NAME)
        others = len(self.sentinel_ports) - 1
        return int(state["num-slaves"]) >= 1 and int(state["num-other-sentinels"]) >= others

    def master_address(self) -> tuple[str, int] | None:
        """The master a sentinel names that answers as a master, or None. Right after a
        failover one sentinel may still name the lost primary: ask the next (as clients do)."""
        for port in self.sentinel_ports:
            try:
                with redis.Redis(host=_HOST, port=port, socket_timeout=2) as client:
                    found = client.sentinel_get_master_addr_by_name(MASTER_NAME)
            except (redis.ConnectionError, redis.TimeoutError):
                continue
            if found:
                host, port_ = found
                named = (host.decode() if isinstance(host, bytes) else str(host), int(port_))
                if _is_master(*named):
                    return named
        return None

    def wait_promoted(self, old_port: int, timeout_s: float = 30) -> tuple[str, int]:
        """Until the sentinels name a master other than the one on `old_port`, and it
        answers as a master; its address."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = self.master_address()
            if found is not None and found[1] != old_port and _is_master(*found):
                return found
            time.sleep(0.05)
        raise ChildFailed(f"no replica promoted within {timeout_s:.0f} s of the primary's loss")

    def wait_replica_online(self, timeout_s: float = 60) -> float:
        """Until the master the sentinels name has a replica online (a returning server is
        turned into one about 8 s after it is up); the seconds that took."""
        began = time.monotonic()
        while time.monotonic() < began + timeout_s:
            found = self.master_address()
            if found is not None and _answering(partial(_replica_online, *found))():
                return time.monotonic() - began
            time.sleep(0.1)
        raise ChildFailed(f"the master had no replica online within {timeout_s:.0f} s")


def _replica_online(host: str, port: int) -> bool:
    with redis.Redis(host=host, port=port, socket_timeout=2, decode_responses=True) as client:
        info = client.info("replication")
    replicas = [info[k] for k in info if k.startswith("slave") and isinstance(info[k], dict)]
    return info.get("role") == "master" and any(r.get("state") == "online" for r in replicas)


def _answering(check: Callable[[], bool]) -> Callable[[], bool]:
    def ready() -> bool:
        try:
            return check()
        except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
            return False  # not listening yet, or not monitoring yet

    return ready


def _is_master(host: str, port: int) -> bool:
    try:
        with redis.Redis(host=host, port=port, socket_timeout=2) as client:
            return bool(client.info("replication").get("role") == "master")
    except (redis.ConnectionError, redis.TimeoutError):
        return False


def _sentinel_binary() -> str:
    path = shutil.which("redis-sentinel")
    if path is None:
        raise RuntimeError(
            "redis-sentinel not found: run `make deps` (apt-get install redis-sentinel)"
        )
    return path
