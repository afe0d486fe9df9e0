"""What only the Redis memory does: its key names, and sharing a session between instances."""

from __future__ import annotations

import redis

from taskyard.agentkit.memory import RedisMemory
from taskyard.plumbing import keys


def test_uses_the_shared_session_key(redis_client: redis.Redis) -> None:
    RedisMemory(redis_client, tenant="acme").add("hi", session_id="s1")
    assert redis_client.llen(keys.session_memory("acme", "s1")) == 1


def test_two_instances_see_the_same_session(redis_client: redis.Redis) -> None:
    writer, reader = RedisMemory(redis_client, tenant="t"), RedisMemory(redis_client, tenant="t")
    writer.add(["a", "b"], session_id=9)
    assert [m.content for m in reader.get_memory(9)] == ["a", "b"]
    assert 9 in reader
    assert [m.content for m in RedisMemory(redis_client, tenant="other").get_memory(9)] == []


def test_works_with_a_client_that_returns_bytes(redis_server: str) -> None:
    with redis.Redis.from_url(f"{redis_server}/3") as raw_client:
        raw_client.flushdb()
        memory = RedisMemory(raw_client)
        memory.add(["a", "b"], session_id=1)
        memory.delete(0, session_id=1)
        assert [m.content for m in memory.get_memory(1)] == ["b"]
        assert memory.save(1)[0]["content"] == "b"
