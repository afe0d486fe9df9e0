"""Fixture: both memory kinds (in process, and Redis on the test run's own server), so one
conformance suite pins both."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from taskyard.agentkit.memory import MemoryManager, RedisMemory, SessionMemory


@pytest.fixture(params=["in_process", "redis"])
def make_memory(request: pytest.FixtureRequest) -> Callable[..., SessionMemory]:
    """A factory of empty memories of one kind; `recent_n` passes through."""
    if request.param == "in_process":
        return MemoryManager
    client = request.getfixturevalue("redis_client")
    return lambda recent_n=None: RedisMemory(client, tenant="t1", recent_n=recent_n)
