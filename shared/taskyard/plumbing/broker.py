"""kombu's Redis transports, with one Redis client per channel instead of one per command.

kombu's Redis channel builds a fresh `redis.Redis` for every publish, unacked record and
ack (`Channel._create_client`), and redis-py's constructor fills a table of ~170 response
callbacks each time: measured here, 0.47 ms of a worker's CPU per client, two per job (its
unacked record and its ack), about a fifth of an agent step. A client only holds the
channel's connection pool, and is safe to share across threads and greenlets, so these
channels keep one. Their ack emulation (`QoS`) writes its record of a job taken, and removes it
on the ack, without MULTI/EXEC (see there). Everything else is kombu's transport as it is;
Celery selects one with ``broker_transport = "taskyard.plumbing.broker:Transport"`` (or
``SentinelTransport`` when Sentinel names the master; see `taskyard.plumbing.celery_app`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kombu.transport import redis as kombu_redis

from taskyard.plumbing.redis_clients import MasterConnection

__all__ = ["Channel", "QoS", "SentinelChannel", "SentinelTransport", "Transport"]


class QoS(kombu_redis.QoS):
    """kombu's ack emulation, its two writes per record pipelined without MULTI/EXEC: 4 Redis
    commands fewer per job (6 per agent step), and two replies fewer to read.

    A transaction buys nothing here. The record of a job taken is its index entry, then its
    payload (kombu's order); the ack removes the payload, then the index entry (the reverse of
    kombu's). Redis runs a connection's commands in order, so a pipeline cut short leaves at
    most an index entry without its payload, which `restore_visible` drops (it restores only
    what has a payload). A transaction cut short would leave nothing: either way a job taken
    and not recorded is gone from the broker, and taskyard's sweep sends its task's step
    again (`tests/e2e/test_faults.py`); an ack cut short leaves nothing to restore. A restore
    (`restore_by_tag`) stays kombu's transaction, watching the payloads: an ack between its
    read and its write makes it read again and find the job acked."""

    @contextmanager
    def pipe_or_acquire(self, pipe: Any = None, client: Any = None) -> Iterator[Any]:
        if pipe is not None:
            yield pipe
            return
        # kombu's stubs (celery-types) leave this method of its Redis channel out.
        with self.channel.conn_or_acquire(client) as acquired:  # type: ignore[attr-defined]
            yield acquired.pipeline(transaction=False)

    def _remove_from_indices(self, delivery_tag: str, pipe: Any = None) -> Any:
        with self.pipe_or_acquire(pipe) as pipe:
            return pipe.hdel(self.unacked_key, delivery_tag).zrem(
                self.unacked_index_key, delivery_tag
            )


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
