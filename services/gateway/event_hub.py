"""One reader of task event streams per gateway process, fanning out to every follower.

A thousand SSE followers would otherwise each block a Redis connection on XREAD. Here one
loop blocks on a single XREAD over every followed stream (plus a wake-up stream of its own,
so a new follower's stream joins at once) and hands entries to the followers. A stream's
first follower starts the stream's reading at its own position, so that XREAD catches it up
too; a follower joining a stream read already registers first and then reads what it missed
with XRANGE, dropping what it already saw, so nothing falls between catching up and
following.

Entries go out as stored (their data is JSON text already) and in batches: what arrived
together is sent together, one chunk through the ASGI stack and one write to the socket.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncGenerator
from dataclasses import dataclass

import orjson
import redis.asyncio as aioredis
from redis.exceptions import RedisError
from redis.typing import KeyT, StreamIdT

from taskyard.plumbing import keys
from taskyard.plumbing.redis_clients import HIREDIS_PACKED, async_client
from taskyard.plumbing.settings import RedisSettings
from taskyard.runtime.events import EventKind
from taskyard.runtime.store import redis_replies
from taskyard.runtime.task import TERMINAL

__all__ = ["Batch", "Entry", "EventHub", "entry_id_key", "reader_client"]

log = logging.getLogger("taskyard.gateway")

_BLOCK_MS = 10_000
_READ_TIMEOUT_S = _BLOCK_MS / 1000 + 5
_BATCH = 200
_FINAL = frozenset(status.value for status in TERMINAL)

Entry = tuple[str, dict[str, str]]  # a stream entry: its id, its fields ("kind", "data")


def entry_id_key(entry_id: str) -> tuple[int, int]:
    """A stream entry id ("ms-seq", or "ms") as a comparable pair."""
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def _is_final(fields: dict[str, str]) -> bool:
    """The task's terminal status (decoded only for status events)."""
    return fields["kind"] == EventKind.STATUS and orjson.loads(fields["data"])["status"] in _FINAL


@dataclass(frozen=True, slots=True)
class Batch:
    """Entries that were ready together; none after a while of silence (a cue for a
    keep-alive). `final`: its last entry is the task's final event, and the stream ends."""

    entries: list[Entry]
    final: bool = False

    @classmethod
    def of(cls, entries: list[Entry]) -> Batch:
        """The entries up to the first final one, if any."""
        for index, (_, fields) in enumerate(entries):
            if _is_final(fields):
                return cls(entries[: index + 1], final=True)
        return cls(entries)


class _Follower:
    __slots__ = ("after", "pending", "waiter")

    def __init__(self, after: str) -> None:
        self.after = entry_id_key(after)
        self.pending: list[Entry] = []
        self.waiter: asyncio.Future[None] | None = None

    def push(self, entries: list[Entry]) -> None:
        self.pending += entries
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def unseen(self) -> list[Entry]:
        """The pending entries past `after` (catching up and following overlap), taken."""
        entries, self.pending = self.pending, []
        fresh = [entry for entry in entries if entry_id_key(entry[0]) > self.after]
        if fresh:
            self.after = entry_id_key(fresh[-1][0])
        return fresh

    async def take(self, wait_s: float) -> list[Entry]:
        """Every entry not seen yet, once there is one; none after `wait_s` of silence. A
        future and a timer, not `wait_for` (a task per call)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while not (fresh := self.unseen()) and loop.time() < deadline:
            self.waiter = waiter = loop.create_future()
            timer = loop.call_at(deadline, _resolve, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                self.waiter = None
        return fresh


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class EventHub:
    """`follow(task_id, after)` yields the task's events after entry id `after`, live."""

    def __init__(
        self, reader: aioredis.Redis, store_client: aioredis.Redis, keep_alive_s: float = 15.0
    ) -> None:
        self.reader = reader  # its own connection: it blocks on XREAD
        self.client = store_client
        self.keep_alive_s = keep_alive_s  # silence before an empty batch
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
    ) -> AsyncGenerator[Batch, None]:
        """Batches of the events after `after`, in order, each as soon as it is ready; an
        empty one after a while of silence. Ends with the final event, or for a task that
        had `ended` before the call, once its events after `after` are out."""
        stream = keys.task_events(task_id)
        follower = _Follower(after)
        if ended:  # nothing more will come: no need to read live
            follower.push(
                redis_replies.stream_entries(await self.client.xrange(stream, f"({after}", "+"))
            )
            if entries := follower.unseen():
                yield Batch.of(entries)
            return
        read_already = await self._join(stream, follower, after)
        try:
            if read_already:
                missed = await self.client.xrange(stream, f"({after}", "+")
                follower.push(redis_replies.stream_entries(missed))
            while True:
                batch = Batch.of(await follower.take(self.keep_alive_s))
                yield batch
                if batch.final:
                    return
        finally:
            self._leave(stream, follower)

    async def _join(self, stream: str, follower: _Follower, after: str) -> bool:
        """Register the follower; whether its stream was read already (else the XREAD starts
        at the follower's position)."""
        followers = self._followers.get(stream)
        if followers:
            followers.add(follower)
            return True
        self._followers[stream] = {follower}
        self._positions[stream] = after
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._read_forever())
        await self.client.xadd(self.wake_key, {"w": "1"}, maxlen=1)  # re-issue the XREAD
        return False

    def _leave(self, stream: str, follower: _Follower) -> None:
        followers = self._followers.get(stream)
        if followers is None:
            return
        followers.discard(follower)
        if not followers:
            del self._followers[stream]
            del self._positions[stream]

    async def _read_forever(self) -> None:
        wake = "0-0"  # a concrete id, so a wake-up written before the first read is not missed
        while self._followers:
            issued: dict[KeyT, StreamIdT] = {self.wake_key: wake}  # xread's (invariant) type
            issued.update(self._positions.items())
            try:
                # The read's own timeout, past the block: a dead connection, not a quiet one.
                # Not the client's `socket_timeout`, which runs each send as a task of its own.
                async with asyncio.timeout(_READ_TIMEOUT_S):
                    batch = await self.reader.xread(issued, block=_BLOCK_MS, count=_BATCH)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis restarting: followers wait, then go on
                log.warning("event hub read failed, retrying: %s", exc)
                await asyncio.sleep(0.5)
                continue
            for stream, entries in redis_replies.streams(batch):
                if stream == self.wake_key:
                    wake = entries[-1][0]
                # Read from where the stream stands now: not left, nor left and followed
                # again from elsewhere while the XREAD was out (the next one reads that).
                elif self._positions.get(stream) == issued[stream]:
                    self._deliver(stream, entries)

    def _deliver(self, stream: str, entries: list[Entry]) -> None:
        self._positions[stream] = entries[-1][0]
        for follower in self._followers[stream]:
            follower.push(entries)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        try:
            await self.client.delete(self.wake_key)
        except RedisError as exc:  # Redis down at shutdown: the rest is closed all the same
            log.warning("event hub: could not remove its wake-up stream: %s", exc)
        await self.reader.aclose()


def reader_client(settings: RedisSettings, client_name: str) -> aioredis.Redis:
    """The hub's reader: a connection of its own, packing commands with hiredis where it is
    installed (a rediss:// or unix:// URL keeps its own connection class)."""
    return async_client(
        settings.redis_url, settings.sentinel, connection_mixin=HIREDIS_PACKED,
        decode_responses=True,
        client_name=client_name,
    )  # fmt: skip
