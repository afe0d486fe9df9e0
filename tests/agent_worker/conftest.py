"""Fixtures the agent worker's tests share: a scripted model and the store on the run's Redis."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import redis

from devstack.scripted_model import ScriptedModelThread
from shared.store import TaskStore


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModelThread]:
    with ScriptedModelThread() as model:
        yield model


@pytest.fixture
async def store(redis_server: str, redis_client: redis.Redis) -> AsyncIterator[TaskStore]:
    """The store on database 0 (`redis_client` flushes it first), its broker on 1."""
    store = TaskStore.from_url(f"{redis_server}/0", f"{redis_server}/1")
    yield store
    await store.close()
