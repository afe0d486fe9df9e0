"""kombu's Redis transports, with one Redis client per channel instead of one per command, and
each job taken recorded in one key.

kombu's Redis channel builds a fresh `redis.Redis` for every publish, unacked record and
ack (`Channel._create_client`), and redis-py's constructor fills a table of ~170 response
callbacks each time: measured here, 0.47 ms of a worker's CPU per client, two per job (its
unacked record and its ack), about a fifth of an agent step. A client only holds the
channel's connection pool, and is safe to share across threads and greenlets, so these
channels keep one. Their ack emulation (`QoS`) records a job taken with one write, and removes
the record on the ack with another, where kombu's takes two each (see there). Everything else
is kombu's transport as it is; Celery selects one with
``broker_transport = "taskyard.plumbing.broker:Transport"`` (or ``SentinelTransport`` when
Sentinel names the master; see `taskyard.plumbing.celery_app`).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cached_property
from typing import Any, NamedTuple

import redis
from kombu.transport import redis as kombu_redis
from kombu.utils.json import dumps, loads

from taskyard.plumbing import keys
from taskyard.plumbing.redis_clients import MasterConnection

__all__ = ["Channel", "QoS", "SentinelChannel", "SentinelTransport", "Transport"]


class _Record(NamedTuple):
    """A job taken, as its sorted-set member: what puts it back on its queue (kombu's record),
    and which take of it this is. kombu gives a message its delivery tag when it is published,
    and a restored job keeps it: without the take's own id, two takes of one job (its first
    worker still running it after a restore) would be one member, and one worker's ack would
    remove the other's record."""

    payload: dict[str, Any]
    exchange: str
    routing_key: str
    take: str

    @classmethod
    def of(cls, message: Any) -> _Record:
        delivery = message.delivery_info
        exchange, routing_key = delivery["exchange"], delivery["routing_key"]
        return cls(message._raw, exchange, routing_key, secrets.token_hex(8))

    @classmethod
    def parse(cls, member: bytes | str) -> _Record:
        return cls(*loads(member))

    def member(self) -> str:
        return dumps(list(self))


class QoS(kombu_redis.QoS):
    """kombu's ack emulation with each job's record in one key: 2 Redis commands per job (a
    ZADD, a ZREM) where kombu's takes 4, besides the BRPOP.

    kombu records a job taken as an index entry (``unacked_index``: its tag by the time) and its
    payload (the ``unacked`` hash), and the ack removes both. Here the record is one member of
    one sorted set (`keys.celery_taken`): the whole `_Record`, scored by the time the job was
    taken. This object keeps each tag's member until its ack, which comes from the process that
    took the job, and removes it with one ZREM. Each write is one command, so neither can be cut
    short halfway, and neither needs MULTI/EXEC. kombu's own `ack`, `reject` and
    `restore_unacked` run as they are, through `_remove_from_indices` and `restore_by_tag`. A
    worker on kombu's QoS (an older one, mid-upgrade) restores from kombu's keys, so it never
    misreads these records; the jobs it recorded there are its own workers' to restore, or the
    sweep's to send again.

    A job goes back to its queue (taken longer than the visibility timeout ago, rejected to be
    requeued, held by a worker that closes) in one transaction: it watches the set, reads that
    the record is still there, then removes it and pushes the job in one MULTI/EXEC. An ack or
    another restorer that removes the record in between aborts it, and the retry finds nothing
    to restore: a job is restored once, never after its ack. An ack after a restore removes
    nothing, and the job runs again, a duplicate taskyard's idempotent steps tolerate. Nothing
    removes a record but an ack, a reject, or a restore that pushes its job back in the same
    transaction, so a job recorded is never lost. Any take or ack between the read and the
    EXEC aborts a restore too; restores are rare, so reading again is cheap."""

    channel: kombu_redis.Channel  # kombu's stubs say a virtual one, which has no Redis client
    _vrestore_count: int  # kombu's count of `restore_visible` calls

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._members: dict[str, str] = {}  # delivery tag -> its record, until acked or restored

    @cached_property
    def taken_key(self) -> str:
        return keys.celery_taken(self.unacked_key)

    def append(self, message: Any, delivery_tag: str) -> None:
        member = _Record.of(message).member()
        with self.channel.conn_or_acquire() as client:
            client.zadd(self.taken_key, {member: time.time()})
        self._members[delivery_tag] = member
        # The channel's own bookkeeping (kombu's `append` would write kombu's record first).
        super(kombu_redis.QoS, self).append(message, delivery_tag)

    @contextmanager
    def pipe_or_acquire(self, pipe: Any = None, client: Any = None) -> Iterator[Any]:
        if pipe is not None:
            yield pipe
            return
        with self.channel.conn_or_acquire(client) as acquired:
            yield acquired.pipeline(transaction=False)

    def _remove_from_indices(self, delivery_tag: str, pipe: Any = None) -> Any:
        """The ack's (or a reject's) removal of the job's record, on a pipeline to execute."""
        with self.pipe_or_acquire(pipe) as pipe:
            member = self._members.pop(delivery_tag, None)
            return pipe if member is None else pipe.zrem(self.taken_key, member)

    def restore_by_tag(self, tag: str, client: Any = None, leftmost: bool = False) -> None:
        member = self._members.pop(tag, None)
        if member is None:
            return  # acked, or restored already
        with self.channel.conn_or_acquire(client) as client:
            self._restore(client, member, leftmost)

    def restore_visible(self, start: int = 0, num: int | None = 10, interval: int = 10) -> None:
        """Every `interval`th call (Celery calls on every poll), the jobs taken longer than the
        visibility timeout ago go back to their queues: their workers died, or run them still.
        Oldest first, at most `num` of them from the `start`th (None: all). One worker at a
        time scans, as kombu's do: its mutex, shared with theirs."""
        self._vrestore_count += 1
        if (self._vrestore_count - 1) % (interval or 1):
            return
        with self.channel.conn_or_acquire() as client:
            try:
                with kombu_redis.Mutex(client, self.unacked_mutex_key, self.unacked_mutex_expire):
                    for member in self._overdue(client, start, num):
                        self._restore(client, member)
            except kombu_redis.MutexHeld:
                pass  # another worker is scanning

    def _overdue(self, client: Any, start: int, num: int | None) -> list[bytes]:
        ceil = time.time() - self.visibility_timeout
        limit = {} if num is None else {"offset": start, "num": num}
        # ZRANGE BYSCORE, not the deprecated ZRANGEBYSCORE some Redis-like servers lack.
        members: list[bytes] = client.zrange(self.taken_key, "-inf", ceil, byscore=True, **limit)
        return members

    def _restore(self, client: Any, member: bytes | str, leftmost: bool = False) -> None:
        """Puts the job back on its queue and removes its record in one transaction, if the
        record is still there when it runs. (kombu's ``global_keyprefix`` would not prefix the
        ZSCORE; taskyard sets no prefix.)"""
        with client.pipeline() as pipe:
            while True:
                try:
                    pipe.watch(self.taken_key)
                    if pipe.zscore(self.taken_key, member) is None:
                        return  # acked, or restored by another
                    record = _Record.parse(member)
                    pipe.multi()
                    pipe.zrem(self.taken_key, member)
                    # As kombu restores (its stubs leave this method out).
                    self.channel._do_restore_message(  # type: ignore[attr-defined]
                        record.payload, record.exchange, record.routing_key, pipe, leftmost
                    )
                    pipe.execute()
                    return
                except redis.WatchError:
                    continue  # the set changed since the read: read again


class _OneClient:
    """Reuses the channel's synchronous client (kombu's async one is made once already)."""

    _shared_client: Any = None

    # kombu's stubs (celery-types) leave this private method out; kombu's Channel has it.
    def _create_client(self, asynchronous: bool = False) -> Any:
        if asynchronous:
            return super()._create_client(asynchronous=True)  # type: ignore[misc]
        if self._shared_client is None:
            self._shared_client = super()._create_client()  # type: ignore[misc]
        return self._shared_client


class Channel(_OneClient, kombu_redis.Channel):
    """kombu's Redis channel, reusing its synchronous client, with the lean `QoS`."""

    QoS = QoS


class Transport(kombu_redis.Transport):
    """kombu's Redis transport with the channel above."""

    Channel = Channel


class SentinelChannel(_OneClient, kombu_redis.SentinelChannel):
    """kombu's Sentinel channel (its pool connects to the master the sentinels name),
    reusing its synchronous client; its connections ask the sentinels again on every
    reconnect (`taskyard.plumbing.redis_clients.MasterConnection`); the lean `QoS`."""

    QoS = QoS
    connection_class = MasterConnection


class SentinelTransport(kombu_redis.SentinelTransport):
    """kombu's Sentinel transport with the channel above."""

    Channel = SentinelChannel
