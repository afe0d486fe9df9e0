"""Fixtures every test area shares: a real Redis of the test run's own."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from services.stack import free_port


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real redis-server on a free loopback port; yields its URL without a database number."""
    binary = shutil.which("redis-server")
    assert binary, "redis-server missing: `make test` installs it"
    port = free_port()
    data_dir: Path = tmp_path_factory.mktemp("redis")
    proc = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(data_dir),
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        stdout=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}"
    client = redis.Redis.from_url(url)
    for _ in range(100):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    yield url
    client.close()
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def redis_client(redis_server: str) -> Iterator[redis.Redis]:
    """A decoded client on a flushed database 0."""
    client = redis.Redis.from_url(f"{redis_server}/0", decode_responses=True)
    client.flushdb()
    yield client
    client.close()


@pytest.fixture(scope="session")
def sandbox_image() -> str:
    """The sandbox image on the real Docker engine, built by the project's scripts if missing."""
    root = Path(__file__).resolve().parent.parent
    subprocess.run(["bash", str(root / "scripts/setup_docker.sh")], check=True)
    subprocess.run(["bash", str(root / "scripts/build_sandbox_image.sh")], check=True)
    return "taskyard/sandbox:latest"
