"""kombu's Redis transports, with one Redis client per channel instead of one per command, and
each job taken recorded in one key, written without waiting for Redis's reply.

kombu's Redis channel builds a fresh `redis.Redis` for every publish, unacked record and
ack (`Channel._create_client`), and redis-py's constructor fills a table of ~170 response
callbacks each time: measured here, 0.47 ms of a worker's CPU per client, two per job (its
unacked record and its ack), about a fifth of an agent step. A client only holds the
channel's connection pool, and is safe to share across threads and greenlets, so these
channels keep one. Their ack emulation (`QoS`) records a job taken with one write, and removes
the record on the ack with another, where kombu's takes two each, and sends that removal with the
next job's record, in one write its job does not wait on, where kombu waits on each (see
there). Everything else is kombu's transport as it is; Celery selects one with
``broker_transport = "taskyard.plumbing.broker:Transport"`` (or ``SentinelTransport`` when
Sentinel names the master; see `taskyard.plumbing.celery_app`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cached_property
from typing import Any, NamedTuple

import redis
from kombu.transport import redis as kombu_redis
from kombu.utils.json import dumps, loads

from taskyard.plumbing import keys
from taskyard.plumbing.ids import unique_hex
from taskyard.plumbing.redis_clients import MasterConnection

__all__ = ["ACK_LAG_S", "Channel", "QoS", "SentinelChannel", "SentinelTransport", "Transport"]

# How long an ack may wait for the next job's record before the poller sends it alone: under
# load the next job comes sooner; idle, the poller wakes at least once a BRPOP timeout (1 s).
ACK_LAG_S = 0.2

log = logging.getLogger("taskyard.broker")


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
        return cls(message._raw, exchange, routing_key, unique_hex(16))

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
    short halfway, and neither needs MULTI/EXEC. The ack, the reject and `restore_by_tag` (which
    kombu's `restore_unacked` runs as it is) are below, so nothing reaches kombu's keys. A
    worker on kombu's QoS (an older one, mid-upgrade) restores from kombu's keys, so it never
    misreads these records; the jobs it recorded there are its own workers' to restore, or the
    sweep's to send again.

    A job goes back to its queue (taken longer than the visibility timeout ago, rejected to be
    requeued, held by a worker that closes) in one transaction: it watches the set, reads that
    the record is still there, then removes it and pushes the job in one MULTI/EXEC. An ack or
    another restorer that removes the record in between aborts it, and the retry finds nothing
    to restore: a job is restored once, never after its ack is sent. An ack after a restore removes
    nothing, and the job runs again, a duplicate taskyard's idempotent steps tolerate. Nothing
    removes a record but an ack, a reject, or a restore that pushes its job back in the same
    transaction, so a job recorded is never lost. Any take or ack between the read and the
    EXEC aborts a restore too; restores are rare, so reading again is cheap.

    An ack's ZREM goes out with the next job's ZADD, in one pipeline, and the job runs without
    waiting for Redis's reply (`_UnwaitedWrites`): a job starts as soon as it is taken. The
    write is on the socket before the job starts, so a worker killed while it runs still left
    its record; a write that fails, or an error Redis answers, is found at the next write (or
    at the restore scan of the poller's next rounds) and every record the worker holds is
    written again, waited on (the job that ran meanwhile has a record again; had its worker
    died first, it is the sweep's, as any job whose record was lost). Before a restore reads
    or removes records on another connection, the replies are read, so Redis has done those
    writes. The ZREMs held go out alone once the oldest waited `ACK_LAG_S` (checked at every
    ack and every round of the poller), before the worker's own restore scan, and when its
    channel closes; so an ack lags by at most one poll of an idle worker (about a second:
    kombu's BRPOP timeout). A worker killed in that lag leaves its last jobs recorded: another
    worker restores them after the visibility timeout, and they run again, as a job whose
    worker died before its ack does."""

    channel: kombu_redis.Channel  # kombu's stubs say a virtual one, which has no Redis client
    _vrestore_count: int  # kombu's count of `restore_visible` calls

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._members: dict[str, str] = {}  # delivery tag -> its record, until acked or restored
        self._acked: list[str] = []  # records of jobs acked, their ZREM not sent yet
        self._acked_since = 0.0  # when the oldest of them was acked (monotonic)

    @cached_property
    def taken_key(self) -> str:
        return keys.celery_taken(self.unacked_key)

    @cached_property
    def _unwaited(self) -> _UnwaitedWrites:
        return _UnwaitedWrites(self.channel.client.connection_pool)

    def append(self, message: Any, delivery_tag: str) -> None:
        member = _Record.of(message).member()
        self._members[delivery_tag] = member
        try:
            with self._sending_acks() as acked:
                self._write(acked, [member])
        except BaseException:
            self._members.pop(delivery_tag, None)
            raise
        # The channel's own bookkeeping (kombu's `append` would write kombu's record first).
        super(kombu_redis.QoS, self).append(message, delivery_tag)

    def _write(self, acked: list[str], taken: list[str]) -> None:
        """Remove the records `acked` and add the records `taken`, not waiting for Redis."""
        try:
            self._unwaited.send(self._commands(acked, taken))
        except redis.RedisError as exc:
            self._write_all_again(exc, acked)

    def settle(self) -> None:
        """Wait until Redis has done every record and ack written (see the class)."""
        try:
            self._unwaited.settle()
        except redis.RedisError as exc:
            self._write_all_again(exc, [])

    def _write_all_again(self, failed: redis.RedisError, acked: list[str]) -> None:
        """After a write that failed (this one, or one before whose reply said so): the records
        of every job held, and the acks `acked`, written again, waited on. An ack lost before
        leaves its record: that job runs again after the visibility timeout."""
        log.warning("a job's record or ack was not written (%s): all written again", failed)
        held = list(self._members.values())
        self._unwaited.send(self._commands(acked, held), wait=True)

    def _commands(self, acked: list[str], taken: list[str]) -> list[tuple[Any, ...]]:
        commands: list[tuple[Any, ...]] = [("ZREM", self.taken_key, *acked)] if acked else []
        if taken:
            now = time.time()
            commands.append(("ZADD", self.taken_key, *(a for m in taken for a in (now, m))))
        return commands

    def close(self) -> None:
        """The acks held sent, every write done by Redis, and the connection given back."""
        try:
            self.send_acks()
            self.settle()
        finally:
            self._unwaited.close()

    def ack(self, delivery_tag: str) -> None:
        """The job's record goes with the next job's (see the class)."""
        member = self._members.pop(delivery_tag, None)
        if member is not None:
            if not self._acked:
                self._acked_since = time.monotonic()
            self._acked.append(member)
        super(kombu_redis.QoS, self).ack(delivery_tag)
        self.send_acks(older_than_s=ACK_LAG_S)  # a worker busy without taking jobs

    def send_acks(self, older_than_s: float = 0.0) -> None:
        """Remove the records of the jobs acked since the last write now, if the oldest was
        acked `older_than_s` ago."""
        if not self._acked or time.monotonic() - self._acked_since < older_than_s:
            return
        with self._sending_acks() as acked:
            self._write(acked, [])

    @contextmanager
    def _sending_acks(self) -> Iterator[list[str]]:
        """The acks held, taken at once (another greenlet or the hub may ack meanwhile); held
        again if the write fails, for the next one."""
        acked, self._acked = self._acked, []
        try:
            yield acked
        except BaseException:
            self._acked[:0] = acked
            raise

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        """Requeued, the job is restored; else its record is removed now, with the acks held,
        written as the records are (after its own record's write, on the same connection)."""
        if requeue:
            self.restore_by_tag(delivery_tag, leftmost=True)
        else:
            member = self._members.pop(delivery_tag, None)
            if member is not None:
                with self._sending_acks() as acked:
                    self._write([*acked, member], [])
        super(kombu_redis.QoS, self).ack(delivery_tag)  # the channel's own bookkeeping

    def restore_by_tag(self, tag: str, client: Any = None, leftmost: bool = False) -> None:
        self.settle()  # its record's write done first (or, failed, done again)
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
        self.send_acks()  # this worker's acked jobs are not overdue
        self.settle()
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


class _LeanChannel:
    """What taskyard's channels change of kombu's: they reuse their synchronous client (kombu's
    async one is made once already), and send the acks their QoS holds before they close."""

    _shared_client: Any = None

    # kombu's stubs (celery-types) leave this private method out; kombu's Channel has it.
    def _create_client(self, asynchronous: bool = False) -> Any:
        if asynchronous:
            return super()._create_client(asynchronous=True)  # type: ignore[misc]
        if self._shared_client is None:
            self._shared_client = super()._create_client()  # type: ignore[misc]
        return self._shared_client

    def close(self) -> None:
        qos = getattr(self, "_qos", None)  # kombu's channel makes it on first use
        if isinstance(qos, QoS):
            _without_redis(qos.close)
        super().close()  # type: ignore[misc]


def _send_acks(channel: Any, older_than_s: float = 0.0) -> None:
    """The acks `channel`'s QoS holds, sent (see `QoS.send_acks`)."""
    qos = getattr(channel, "_qos", None)  # kombu's channel makes it on first use
    if isinstance(qos, QoS):
        _without_redis(lambda: qos.send_acks(older_than_s))


def _without_redis(write: Callable[[], None]) -> None:
    """`write`, or a warning when Redis is gone: the acks held are then not sent."""
    try:
        write()
    except redis.RedisError as exc:
        log.warning("acks not sent (%s): their jobs run again after the visibility timeout", exc)


class _UnwaitedWrites:
    """Commands written on a connection of their own, its replies read at the next write (by
    then they have come) or at `settle`: the writer does not wait for Redis. A reply that is
    an error, or a connection lost, raises there, from the write or `settle` that found it;
    the connection is then made again for the next. Safe across threads and greenlets."""

    def __init__(self, pool: redis.ConnectionPool) -> None:
        self._pool = pool
        self._connection: Any = None
        self._unread = 0  # replies of earlier writes not read yet
        self._lock = threading.Lock()

    def send(self, commands: list[tuple[Any, ...]], wait: bool = False) -> None:
        """Write `commands` in one go; with `wait`, return once Redis has done them."""
        with self._using() as connection:
            # No health check: its PING's reply would be read in place of these.
            connection.send_packed_command(connection.pack_commands(commands), False)
            earlier = self._unread
            self._unread += len(commands)
            self._read(earlier)  # the earlier writes' replies: here by now, or soon
            if wait:
                self._read(self._unread)

    def settle(self) -> None:
        """Return once Redis has done every write sent."""
        if self._unread:  # else nothing to wait for (and no connection to make)
            with self._using():
                self._read(self._unread)

    @contextmanager
    def _using(self) -> Iterator[Any]:
        """The connection, to this caller alone; dropped if anything fails on it."""
        with self._lock:
            try:
                self._connection = self._connection or self._pool.get_connection()
                yield self._connection
            except BaseException:
                self._drop()
                raise

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._pool.release(self._connection)
                self._connection, self._unread = None, 0

    def _read(self, replies: int) -> None:
        """Read the next `replies` replies (raising the first error among them)."""
        for _ in range(replies):
            self._unread -= 1
            self._connection.read_response(disable_decoding=True)

    def _drop(self) -> None:
        if self._connection is not None:
            self._connection.disconnect()
            self._pool.release(self._connection)
        self._connection, self._unread = None, 0


class _Poller(kombu_redis.MultiChannelPoller):
    """kombu's poller of the channels' BRPOPs, sending the acks each channel holds before every
    wait for jobs (Celery's loop, or its hub's every tick, starts each round here)."""

    _channels: set[Any]

    def on_poll_start(self) -> None:
        for channel in self._channels:
            _send_acks(channel, older_than_s=ACK_LAG_S)
        super().on_poll_start()


class _PollsAcks:
    """A transport whose channels share the poller above."""

    cycle: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cycle = _Poller()  # kombu's __init__ made its own, used by nothing yet


class Channel(_LeanChannel, kombu_redis.Channel):
    """kombu's Redis channel, reusing its synchronous client, with the lean `QoS`."""

    QoS = QoS


class Transport(_PollsAcks, kombu_redis.Transport):
    """kombu's Redis transport with the channel and poller above."""

    Channel = Channel


class SentinelChannel(_LeanChannel, kombu_redis.SentinelChannel):
    """kombu's Sentinel channel (its pool connects to the master the sentinels name),
    reusing its synchronous client; its connections ask the sentinels again on every
    reconnect (`taskyard.plumbing.redis_clients.MasterConnection`); the lean `QoS`."""

    QoS = QoS
    connection_class = MasterConnection


class SentinelTransport(_PollsAcks, kombu_redis.SentinelTransport):
    """kombu's Sentinel transport with the channel and poller above."""

    Channel = SentinelChannel
