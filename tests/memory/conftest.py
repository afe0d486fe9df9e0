"""Fixtures: a private redis-server on a free loopback port, and both memory kinds to test."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable, Iterator

import pytest
import redis

from shared.memory import MemoryManager, RedisMemory, SessionMemory


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_ready(client: redis.Redis) -> None:
    for _ in range(200):
        try:
            client.ping()
            return
        except redis.ConnectionError:
            time.sleep(0.025)
    raise RuntimeError("redis-server did not start")


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A redis-server of our own, on loopback, stopped after the session."""
    port, workdir = _free_port(), tmp_path_factory.mktemp("redis")
    args = ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(workdir)]
    server = subprocess.Popen(["redis-server", *args], stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    with redis.Redis.from_url(url) as client:
        _wait_ready(client)
    yield url
    server.terminate()
    server.wait(timeout=10)


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    """A client on a flushed database."""
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    yield client
    client.close()


@pytest.fixture(params=["in_process", "redis"])
def make_memory(request: pytest.FixtureRequest) -> Callable[..., SessionMemory]:
    """A factory for each memory kind, so one conformance suite pins both."""
    if request.param == "in_process":
        return MemoryManager
    client = request.getfixturevalue("redis_client")
    return lambda recent_n=None: RedisMemory(client, tenant="t1", recent_n=recent_n)
