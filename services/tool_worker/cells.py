"""The interpreter cells of each session, in Redis (`taskyard.agentkit.actions.cells.CellLog`): any
tool worker that gets a session's next call can replay what the lost interpreter ran.

A tool call holds the cells it runs (`RedisCellLog.held`) and its result's write records them
(`put_tool_result.lua`): no write of their own, no hop to the store's loop. Cells run outside
a call, or that no result took, are written at once."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import redis.asyncio as aioredis

from taskyard.agentkit.text import replace_lone_surrogates
from taskyard.plumbing import keys
from taskyard.plumbing.loop import LoopThread
from taskyard.runtime.store.documents import CellsDoc

__all__ = ["HeldCells", "RedisCellLog"]

# A cell longer than this is kept as a comment saying so: a replay runs the rest and shows it.
MAX_CELL_CHARS = 64_000


@dataclass(slots=True)
class HeldCells:
    """The cells a call ran in its session, not recorded yet."""

    session_key: str
    codes: list[str] = field(default_factory=list)


# The call running in this context (the toolbox runs a call in a copy of its caller's).
_holding: ContextVar[HeldCells | None] = ContextVar("taskyard_held_cells", default=None)


class RedisCellLog:
    """A `CellLog` on the store's Redis, used from the worker's threads through its loop. Each
    session keeps its last `keep` cells, for `ttl_s` after its last one."""

    def __init__(self, r: aioredis.Redis, loop: LoopThread, ttl_s: float, keep: int = 100):
        self._r = r
        self._loop = loop
        self._ttl_s = max(1, int(ttl_s))
        self._keep = keep

    def ran(self, session_key: str, code: str) -> None:
        held = _holding.get()
        if held is not None and held.session_key == session_key:
            held.codes.append(_recorded(code))
            return
        self._loop.run(self._ran(keys.session_cells(session_key), [_recorded(code)]))

    @contextmanager
    def held(self, session_key: str) -> Iterator[HeldCells]:
        """Hold the cells run in `session_key` while the block runs, for the call's result to
        record (`document`, then clear them); those left are written as the block ends."""
        held = HeldCells(session_key)
        token = _holding.set(held)
        try:
            yield held
        finally:
            _holding.reset(token)
            if held.codes:
                self._loop.run(self._ran(keys.session_cells(session_key), held.codes))

    def document(self, held: HeldCells) -> CellsDoc:
        """The held cells as the result's write records them."""
        return CellsDoc(codes=list(held.codes), keep=self._keep, ttl_s=self._ttl_s)

    def restarted(self, session_key: str) -> int:
        return self._loop.run(self._restarted(session_key))

    def take_replay(self, session_key: str) -> list[str]:
        return self._loop.run(self._take(keys.session_replay(session_key)))

    async def _ran(self, cells: str, codes: list[str]) -> None:
        async with self._r.pipeline(transaction=True) as pipe:
            pipe.rpush(cells, *codes)
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


def _recorded(code: str) -> str:
    """The cell as the log keeps it: UTF-8 text (a result's write must not fail on it)."""
    if len(code) > MAX_CELL_CHARS:
        return f"# (a cell of {len(code)} characters was too long to record; not run again)"
    text: str = replace_lone_surrogates(code)
    return text
