"""Fixtures for the proxy tests: scripted replicas and proxies as real processes, and a Redis
of the proxy tests' own."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from proxy_support import FAST_HEALTH, ProxyFactory, Replica, ReplicaFactory, free_port

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

    def start(upstreams: str | None = None, *, env: dict[str, str] | None = None,
              **kwargs: str) -> ProxyProcess:
        process = ProxyProcess(upstreams, env={**FAST_HEALTH, **(env or {})}, **kwargs)
        started.append(process.start())
        return process

    yield start
    for process in started:
        process.stop()


@pytest.fixture(scope="session")
def proxy_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A redis-server of the proxy tests' own, on a free port; yields its URL."""
    binary = shutil.which("redis-server")
    assert binary, "redis-server is not installed"
    port = free_port()
    data_dir: Path = tmp_path_factory.mktemp("proxy-redis")
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data_dir),
         "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    for _ in range(100):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    yield url
    client.close()
    process.terminate()
    process.wait(timeout=10)
