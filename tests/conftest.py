"""Fixtures every test area shares: a real Redis of the test run's own, the task store on it,
the sandbox image."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from redis_group import RedisGroup, start_redis_group

from devstack.procs import Processes, free_port
from devstack.redis_server import start as start_redis
from devstack.stack import remove_sandboxes
from taskyard.plumbing.settings import SandboxSettings
from taskyard.runtime.store import TaskStore


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real redis-server on a free loopback port; yields its URL without a database number."""
    port, run_dir = free_port(), tmp_path_factory.mktemp("redis")
    with Processes(log_dir=run_dir) as processes:
        start_redis(processes, "redis", port, run_dir / "data")
        yield f"redis://127.0.0.1:{port}"


@pytest.fixture
def redis_client(redis_server: str) -> Iterator[redis.Redis]:
    """A decoded client on a flushed database 0."""
    client = redis.Redis.from_url(f"{redis_server}/0", decode_responses=True)
    client.flushdb()
    yield client
    client.close()


@pytest.fixture
async def store(redis_server: str, redis_client: redis.Redis) -> AsyncIterator[TaskStore]:
    """The task store on database 0 (`redis_client` flushes it), its Celery broker on 1, flushed
    too: the URLs every area's `settings` names (`{redis_server}/0`, `/1`)."""
    redis.Redis.from_url(f"{redis_server}/1").flushdb()
    store = TaskStore.from_url(f"{redis_server}/0", f"{redis_server}/1")
    yield store
    await store.close()


@pytest.fixture(scope="session", autouse=True)
def sandbox_worker_label() -> Iterator[str]:
    """A worker label of this test run's own: providers made here clear only what they left.

    Without it, every provider would use the hostname, and a provider's start-up clean-up
    would remove other test runs' sandboxes on this machine.
    """
    label = f"test-{uuid.uuid4().hex[:12]}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TASKYARD_SANDBOX_WORKER_LABEL", label)
        yield label
    # What the run's providers left: kernels handed off to a worker that never came exit,
    # and an exited container stays on the engine until removed.
    remove_sandboxes(label)


@pytest.fixture(scope="session")
def sandbox_image() -> str:
    """The sandbox image on the real Docker engine, built by the project's scripts if missing.

    The tag is `SandboxSettings().sandbox_image` (TASKYARD_SANDBOX_IMAGE), so a test run can build
    and use its own tag while other runs on the machine use taskyard/sandbox:latest.
    """
    image = SandboxSettings().sandbox_image
    asked = os.environ.get("SANDBOX_IMAGE", image)
    assert asked == image, f"SANDBOX_IMAGE={asked} but TASKYARD_SANDBOX_IMAGE={image}: set both"
    root = Path(__file__).resolve().parent.parent
    subprocess.run(["bash", str(root / "scripts/setup_docker.sh")], check=True)
    env = {**os.environ, "SANDBOX_IMAGE": image}
    subprocess.run(["bash", str(root / "scripts/build_sandbox_image.sh")], check=True, env=env)
    return image


@pytest.fixture(scope="session")
def _span_exporter() -> InMemorySpanExporter:
    # OpenTelemetry takes one global tracer provider per process: set it once, for every test
    # that records spans.
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return exporter


@pytest.fixture
def spans(_span_exporter: InMemorySpanExporter) -> Iterator[InMemorySpanExporter]:
    """Spans finished in this process during the test, in memory."""
    _span_exporter.clear()
    yield _span_exporter
    _span_exporter.clear()


@pytest.fixture
def redis_group(tmp_path: Path) -> Iterator[RedisGroup]:
    """A primary of this test's own (it may be killed), its replica and three sentinels, each
    ready: the replica linked, every sentinel knowing the replica and its peers."""
    with start_redis_group(tmp_path) as group:
        yield group
