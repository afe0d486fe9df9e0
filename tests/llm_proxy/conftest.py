"""Fixtures for the proxy tests: scripted replicas and proxies as real processes, and a Redis
of the proxy tests' own."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import count
from pathlib import Path

import pytest
from proxy_support import FAST_HEALTH, ProxyFactory, ProxyProcess, Replica, ReplicaFactory

from devstack.procs import Processes


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Processes]:
    """The test's child processes, logs in its temporary directory; all stopped at its end."""
    with Processes(log_dir=tmp_path / "logs") as started:
        yield started


@pytest.fixture
def replicas(procs: Processes) -> ReplicaFactory:
    """Start scripted replicas: ``replicas(3)`` or ``replicas(1, "--model", "big")``."""

    numbers = count()

    def start(how_many: int, *args: str) -> list[Replica]:
        names = [f"replica-{next(numbers)}" for _ in range(how_many)]
        return [Replica(procs, name, *args).start() for name in names]

    return start


@pytest.fixture
def proxy(procs: Processes) -> ProxyFactory:
    """Start proxies: ``proxy(upstreams, env={...})``, with fast health checks by default."""

    numbers = count()

    def start(
        upstreams: str | None = None, *, env: dict[str, str] | None = None, **flags: str
    ) -> ProxyProcess:
        name = f"proxy-{next(numbers)}"
        return ProxyProcess(procs, name, upstreams, env={**FAST_HEALTH, **(env or {})}, **flags)

    return start


@pytest.fixture(scope="session")
def proxy_redis(redis_server: str) -> str:
    """The test run's Redis, on a database of the proxy tests' own."""
    return f"{redis_server}/5"
