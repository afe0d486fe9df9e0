"""The interpreter cells of each session, in Redis (`taskyard.agentkit.actions.cells.CellLog`): any
tool worker that gets a session's next call can replay what the lost interpreter ran."""

from __future__ import annotations

import redis.asyncio as aioredis

from taskyard.plumbing import keys
from taskyard.plumbing.loop import LoopThread

__all__ = ["RedisCellLog"]

# A cell longer than this is kept as a comment saying so: a replay runs the rest and shows it.
MAX_CELL_CHARS = 64_000


class RedisCellLog:
    """A `CellLog` on the store's Redis, used from the worker's threads through its loop. Each
    session keeps its last `keep` cells, for `ttl_s` after its last one."""

    def __init__(self, r: aioredis.Redis, loop: LoopThread, ttl_s: float, keep: int = 100):
        self._r = r
        self._loop = loop
        self._ttl_s = max(1, int(ttl_s))
        self._keep = keep

    def ran(self, session_key: str, code: str) -> None:
        self._loop.run(self._ran(keys.session_cells(session_key), code))

    def restarted(self, session_key: str) -> int:
        return self._loop.run(self._restarted(session_key))

    def take_replay(self, session_key: str) -> list[str]:
        return self._loop.run(self._take(keys.session_replay(session_key)))

    async def _ran(self, cells: str, code: str) -> None:
        if len(code) > MAX_CELL_CHARS:
            code = f"# (a cell of {len(code)} characters was too long to record; not run again)"
        async with self._r.pipeline(transaction=True) as pipe:
            pipe.rpush(cells, code)
            pipe.ltrim(cells, -self._keep, -1)
            pipe.expire(cells, self._ttl_s)
            await pipe.execute()

    async def _restarted(self, session_key: str) -> int:
        cells, replay = keys.session_cells(session_key), keys.session_replay(session_key)
        async with self._r.pipeline(transaction=True) as pipe:
            pipe.delete(replay)
            pipe.llen(cells)
            pipe.copy(cells, replay)
            pipe.delete(cells)
            pipe.expire(replay, self._ttl_s)
            _, kept, *_ = await pipe.execute()
        return int(kept)

    async def _take(self, replay: str) -> list[str]:
        async with self._r.pipeline(transaction=True) as pipe:
            pipe.lrange(replay, 0, -1)
            pipe.delete(replay)
            cells, _ = await pipe.execute()
        return [cell.decode() if isinstance(cell, bytes) else cell for cell in cells]
