"""The tool worker's runner as its worker opens one, on the test's Redis."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from services.tool_worker.call_runner import ToolCallRunner
from taskyard.plumbing.celery_app import make_celery
from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.runtime.store.sandboxes import ToolWorkerId


@pytest.fixture
def runner(redis_server: str, redis_client: redis.Redis) -> Iterator[ToolCallRunner]:
    """A runner on db 0 (flushed); its sandboxes (local ones) are made by the first call."""
    settings = ToolWorkerSettings(
        redis_url=f"{redis_server}/0", sandbox_backend="local", sandbox_warm_pool=0
    )
    opened = ToolCallRunner.open(
        settings, ToolWorkerId(settings.sandbox_worker_label), make_celery(settings)
    )
    artifact_store = opened.artifacts.store  # a test may hand the runner another
    yield opened
    opened.tools.close()
    opened.loop.run(opened.store.close())
    opened.loop.run(artifact_store.close())
    opened.loop.close()
