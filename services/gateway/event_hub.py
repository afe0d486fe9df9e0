"""One reader of task event streams per gateway process, fanning out to every follower.

A thousand SSE followers would otherwise each block a Redis connection on XREAD. Here one
loop blocks on a single XREAD over every followed stream (plus a wake-up stream of its own,
so a new follower's stream joins at once) and hands entries to the followers' queues. A
follower registers first and then reads what it missed with XRANGE, dropping what it already
saw, so nothing falls between catching up and following.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator

import redis.asyncio as aioredis

from shared import keys
from shared.events import Event, decode_entry

__all__ = ["HUB_READ_TIMEOUT_S", "EventHub", "entry_id_key"]

log = logging.getLogger("taskyard.gateway")

_BLOCK_MS = 10_000
HUB_READ_TIMEOUT_S = _BLOCK_MS / 1000 + 5
_BATCH = 200


def entry_id_key(entry_id: str) -> tuple[int, int]:
    """A stream entry id ("ms-seq", or "ms") as a comparable pair."""
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


class _Follower:
    def __init__(self, after: str) -> None:
        self.queue: asyncio.Queue[tuple[str, dict[str, str]]] = asyncio.Queue()
        self.after = after


class EventHub:
    """`follow(task_id, after)` yields the task's events after entry id `after`, live."""

    def __init__(self, reader: aioredis.Redis, store_client: aioredis.Redis) -> None:
        self.reader = reader  # its own connection: it blocks on XREAD
        self.client = store_client
        self.wake_key = keys.gateway_wake(uuid.uuid4().hex)
        self._followers: dict[str, set[_Follower]] = {}
        self._positions: dict[str, str] = {}
        self._task: asyncio.Task[None] | None = None

    @property
    def followed(self) -> int:
        """How many streams the hub reads."""
        return len(self._followers)

    async def follow(
        self, task_id: str, after: str = "0-0", ended: bool = False
    ) -> AsyncIterator[Event | None]:
        """Events after `after`, in order; None now and then while nothing happens (a cue for
        a keep-alive). Ends after the final event, or at once for a task that had `ended`
        before the call once its events after `after` are out."""
        stream = keys.task_events(task_id)
        follower = _Follower(after)
        await self._join(stream, follower)
        try:
            for entry_id, fields in await self.client.xrange(stream, f"({after}", "+"):
                event = self._take(follower, entry_id, fields)
                if event is not None:
                    yield event
                    if event.is_final:
                        return
            if ended:
                return  # the client had the final event already
            while True:
                try:
                    entry_id, fields = await asyncio.wait_for(follower.queue.get(), 15)
                except TimeoutError:
                    yield None
                    continue
                event = self._take(follower, entry_id, fields)
                if event is not None:
                    yield event
                    if event.is_final:
                        return
        finally:
            self._leave(stream, follower)

    def _take(self, follower: _Follower, entry_id: str, fields: dict[str, str]) -> Event | None:
        if entry_id_key(entry_id) <= entry_id_key(follower.after):
            return None  # seen already (catching up and following overlap)
        follower.after = entry_id
        return decode_entry(entry_id, fields)

    async def _join(self, stream: str, follower: _Follower) -> None:
        new = stream not in self._followers
        self._followers.setdefault(stream, set()).add(follower)
        if new:
            self._positions[stream] = follower.after
            await self.client.xadd(self.wake_key, {"w": "1"}, maxlen=1)  # re-issue the XREAD
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._read_forever())

    def _leave(self, stream: str, follower: _Follower) -> None:
        followers = self._followers.get(stream)
        if followers is None:
            return
        followers.discard(follower)
        if not followers:
            del self._followers[stream]
            self._positions.pop(stream, None)

    async def _read_forever(self) -> None:
        wake = "0-0"  # a concrete id, so a wake-up written before the first read is not missed
        while self._followers:
            streams = {self.wake_key: wake, **self._positions}
            try:
                batch = await self.reader.xread(streams, block=_BLOCK_MS, count=_BATCH)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis restarting: followers wait, then go on
                log.warning("event hub read failed, retrying: %s", exc)
                await asyncio.sleep(0.5)
                continue
            for stream, entries in batch or []:
                if stream == self.wake_key:
                    wake = entries[-1][0]
                    continue
                self._deliver(stream, entries)

    def _deliver(self, stream: str, entries: list[tuple[str, dict[str, str]]]) -> None:
        if stream not in self._positions:
            return  # its last follower left meanwhile
        self._positions[stream] = entries[-1][0]
        for follower in self._followers.get(stream, ()):
            for entry in entries:
                follower.queue.put_nowait(entry)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.client.delete(self.wake_key)
        await self.reader.aclose()
