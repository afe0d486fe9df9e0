"""The gateway in process (`TestClient`) on the run's real Redis: store and Celery broker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from fastapi.testclient import TestClient

from services.gateway.app import create_app
from taskyard.plumbing.settings import GatewaySettings


@pytest.fixture
def settings(redis_server: str, redis_client: redis.Redis) -> GatewaySettings:
    """Two tenants (key-a, key-b) on flushed databases."""
    redis.Redis.from_url(f"{redis_server}/1").flushdb()
    return GatewaySettings(
        redis_url=f"{redis_server}/0",
        broker_url=f"{redis_server}/1",
        result_backend=f"{redis_server}/2",
        api_keys="key-a=tenant-a,key-b=tenant-b",
    )


@pytest.fixture
def client(settings: GatewaySettings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as c:
        yield c
