"""Fixtures for the proxy tests: scripted replicas and proxies as real processes, and a Redis
of the proxy tests' own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from proxy_support import FAST_HEALTH, ProxyFactory, Replica, ReplicaFactory

from services.llm_proxy.testing import ProxyProcess


@pytest.fixture
def replicas() -> Iterator[ReplicaFactory]:
    """Start scripted replicas: ``replicas(3)`` or ``replicas(1, "--model", "big")``."""
    started: list[Replica] = []

    def start(count: int, *args: str) -> list[Replica]:
        group = [Replica(*args) for _ in range(count)]
        for replica in group:
            started.append(replica.start())
        return group

    yield start
    for replica in started:
        replica.kill()


@pytest.fixture
def proxy() -> Iterator[ProxyFactory]:
    """Start proxies: ``proxy(upstreams, env={...})``, with fast health checks by default."""
    started: list[ProxyProcess] = []

    def start(
        upstreams: str | None = None, *, env: dict[str, str] | None = None, **kwargs: str
    ) -> ProxyProcess:
        process = ProxyProcess(upstreams, env={**FAST_HEALTH, **(env or {})}, **kwargs)
        started.append(process.start())
        return process

    yield start
    for process in started:
        process.stop()


@pytest.fixture(scope="session")
def proxy_redis(redis_server: str) -> str:
    """The test run's Redis, on a database of the proxy tests' own."""
    return f"{redis_server}/5"
