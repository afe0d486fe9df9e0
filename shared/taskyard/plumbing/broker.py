"""kombu's Redis transports, with one Redis client per channel instead of one per command.

kombu's Redis channel builds a fresh `redis.Redis` for every publish, unacked record and
ack (`Channel._create_client`), and redis-py's constructor fills a table of ~170 response
callbacks each time: measured here, 0.47 ms of a worker's CPU per client, two per job (its
unacked record and its ack), about a fifth of an agent step. A client only holds the
channel's connection pool, and is safe to share across threads and greenlets, so these
channels keep one. Everything else is kombu's transport as it is; Celery selects one with
``broker_transport = "taskyard.plumbing.broker:Transport"`` (or ``SentinelTransport`` when Sentinel
names the master; see `taskyard.plumbing.celery_app`).
"""

from __future__ import annotations

from typing import Any

from kombu.transport import redis as kombu_redis

from taskyard.plumbing.redis_clients import MasterConnection

__all__ = ["Channel", "SentinelChannel", "SentinelTransport", "Transport"]


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
    """kombu's Redis channel, reusing its synchronous client."""


class Transport(kombu_redis.Transport):
    """kombu's Redis transport with the channel above."""

    Channel = Channel


class SentinelChannel(_OneClient, kombu_redis.SentinelChannel):
    """kombu's Sentinel channel (its pool connects to the master the sentinels name),
    reusing its synchronous client; its connections ask the sentinels again on every
    reconnect (`taskyard.plumbing.redis_clients.MasterConnection`)."""

    connection_class = MasterConnection


class SentinelTransport(kombu_redis.SentinelTransport):
    """kombu's Sentinel transport with the channel above."""

    Channel = SentinelChannel
