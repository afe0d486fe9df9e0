"""The store on database 0 of the run's Redis (`redis_client` flushes it first), its broker
on 1."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis

from shared.store import TaskStore


@pytest.fixture
async def store(redis_server: str, redis_client: redis.Redis) -> AsyncIterator[TaskStore]:
    store = TaskStore.from_url(f"{redis_server}/0", f"{redis_server}/1")
    yield store
    await store.close()
