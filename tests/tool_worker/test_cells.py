"""The sessions' interpreter cells in Redis: kept in order and bounded, set aside when the
interpreter is replaced, taken once by a replay; gone with the session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
import redis.asyncio as aioredis

from services.tool_worker.cells import MAX_CELL_CHARS, RedisCellLog
from taskyard.plumbing import keys
from taskyard.plumbing.loop import LoopThread
from taskyard.runtime.store import TaskStore
from taskyard.runtime.store.sessions import forget_session


@pytest.fixture
def loop() -> Iterator[LoopThread]:
    loop = LoopThread("test-cells")
    yield loop
    loop.close()


@pytest.fixture
def cells(redis_server: str, redis_client: redis.Redis, loop: LoopThread) -> Iterator[RedisCellLog]:
    client = aioredis.Redis.from_url(f"{redis_server}/0")
    yield RedisCellLog(client, loop, ttl_s=60, keep=3)
    loop.run(client.aclose())


def test_cells_are_set_aside_when_the_interpreter_is_replaced_and_replayed_once(
    cells: RedisCellLog, redis_client: redis.Redis
) -> None:
    for code in ("a = 1", "b = 2"):
        cells.ran("t:s", code)
    cells.ran("t:other", "c = 3")
    assert cells.restarted("t:s") == 2
    cells.ran("t:s", "after = 1")  # the fresh interpreter's own
    assert cells.take_replay("t:s") == ["a = 1", "b = 2"]
    assert cells.take_replay("t:s") == []
    assert redis_client.lrange(keys.session_cells("t:s"), 0, -1) == ["after = 1"]
    assert 0 < redis_client.ttl(keys.session_cells("t:s")) <= 60
    assert cells.restarted("t:nothing") == 0


def test_a_second_loss_replaces_what_the_first_set_aside(cells: RedisCellLog) -> None:
    cells.ran("t:s", "a = 1")
    cells.restarted("t:s")
    cells.ran("t:s", "b = 2")
    assert cells.restarted("t:s") == 1
    assert cells.take_replay("t:s") == ["b = 2"]


def test_only_the_last_cells_are_kept_and_a_huge_one_says_so(cells: RedisCellLog) -> None:
    for n in range(5):
        cells.ran("t:s", f"x = {n}")
    cells.ran("t:s", "y = '" + "y" * MAX_CELL_CHARS + "'")
    cells.restarted("t:s")
    kept = cells.take_replay("t:s")
    assert kept[:2] == ["x = 3", "x = 4"]
    assert kept[2].startswith("# (a cell of 64006 characters was too long to record")


def test_deleting_the_session_deletes_its_cells(
    cells: RedisCellLog, redis_server: str, redis_client: redis.Redis, loop: LoopThread
) -> None:
    cells.ran("t:s", "a = 1")
    cells.restarted("t:s")
    cells.ran("t:s", "b = 1")
    url = f"{redis_server}/0"

    async def forget() -> None:
        store = TaskStore.from_url(url, f"{redis_server}/1")
        await forget_session(store, "t", "s")
        await store.close()

    loop.run(forget())
    assert not redis_client.exists(keys.session_cells("t:s"), keys.session_replay("t:s"))


def test_a_calls_cells_are_held_for_its_result_and_written_if_none_took_them(
    cells: RedisCellLog, redis_client: redis.Redis
) -> None:
    with cells.held("t:s") as held:
        cells.ran("t:s", "a = 1")
        cells.ran("t:other", "b = 2")  # another session's: written at once
        assert redis_client.lrange(keys.session_cells("t:s"), 0, -1) == []
        assert redis_client.lrange(keys.session_cells("t:other"), 0, -1) == ["b = 2"]
        assert cells.document(held) == {"codes": ["a = 1"], "keep": 3, "ttl_s": 60}
    assert redis_client.lrange(keys.session_cells("t:s"), 0, -1) == ["a = 1"]
    with cells.held("t:s") as held:
        cells.ran("t:s", "c = 3")
        held.codes.clear()  # a result's write recorded them
    assert redis_client.lrange(keys.session_cells("t:s"), 0, -1) == ["a = 1"]
