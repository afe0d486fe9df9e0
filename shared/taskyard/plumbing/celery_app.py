"""The Celery app factory every service uses, configured as Celery's docs recommend for
reliable work on Redis: late acks, requeue on a lost worker, one message prefetched."""

from __future__ import annotations

import gc
import logging
from typing import Any
from urllib.parse import urlsplit

from celery import Celery, Task, signals
from celery.app import trace
from kombu import Queue
from redis.connection import parse_url

from taskyard.plumbing import keys
from taskyard.plumbing.redis_clients import SENTINEL_CLIENT_OPTIONS, SentinelSpec
from taskyard.plumbing.settings import BrokerSettings

__all__ = ["JobTask", "make_celery"]

# A bound job task as its body sees itself: it takes the job's payload (a JSON object).
JobTask = Task[[dict[str, Any]], None]


# Container allocations between young-generation collections (CPython's default: 700).
_GC_YOUNG = 10_000


@signals.worker_ready.connect
def _settle_heap(**_: object) -> None:
    """Once a worker is up, what it imported and built stays for its life: frozen, the cyclic
    collector no longer walks it, and it collects the young generation less often (a step
    makes thousands of short-lived containers). Measured: the agent worker's time in the
    collector went from 0.36 to 0.02 ms per step (docs/benchmarks.md)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(_GC_YOUNG, *gc.get_threshold()[1:])


@signals.setup_logging.connect
def _keep_json_logs(**_: object) -> None:
    """Celery configures no logging while a receiver is connected here: its lines (a worker's
    "ready.", beat's schedule) go through `taskyard.plumbing.logs`, set up by the service's
    module."""


def make_celery(settings: BrokerSettings, tool_names: list[str] | None = None) -> Celery:
    """A Celery app on the settings' broker, with the `agent` and `webhooks` queues and one
    queue per tool."""
    app = Celery("taskyard", broker=settings.broker_url, backend=settings.result_backend)
    queues = [Queue(keys.AGENT_QUEUE), Queue(keys.WEBHOOK_QUEUE)]
    queues += [Queue(keys.tool_queue(name)) for name in tool_names or []]
    app.conf.update(
        task_queues=queues,
        task_default_queue=keys.AGENT_QUEUE,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_serializer="json",
        accept_content=["json"],
        result_serializer="json",
        task_ignore_result=True,  # results travel through the task store, not the backend
        # One backend object per process: by default each thread (each greenlet, under the
        # gevent pool) builds its own on its first job, which costs milliseconds.
        result_backend_thread_safe=True,
        broker_connection_retry_on_startup=True,
        # kombu's Redis transport, one client
        broker_transport="taskyard.plumbing.broker:Transport",
        broker_transport_options=_transport_options(settings),
        worker_hijack_root_logger=False,
    )
    if settings.sentinel is not None:
        app.conf.update(_through_sentinel(settings, settings.sentinel))
    _log_job_lines(settings.celery_job_logs)
    return app


def _per_job_line(record: logging.LogRecord) -> bool:
    return record.msg not in (trace.LOG_RECEIVED, trace.LOG_SUCCESS)


def _log_job_lines(wanted: bool) -> None:
    """Celery logs two INFO lines per job (received, succeeded in): about 30 us of CPU per
    job (42 written, 10 filtered out), and taskyard's events and logs say as much. Unless
    wanted, those two go; a retry's line, a failure's and every other stay."""
    for name in ("celery.app.trace", "celery.worker.strategy"):
        logger = logging.getLogger(name)
        if wanted:
            logger.removeFilter(_per_job_line)
        else:
            logger.addFilter(_per_job_line)  # a filter already there is not added twice


def _through_sentinel(settings: BrokerSettings, sentinel: SentinelSpec) -> dict[str, Any]:
    """Broker and result backend on the master the sentinels name: kombu's and Celery's
    ``sentinel://`` URLs (one per sentinel, the database and password of our URLs) and the
    master's name in their transport options."""
    options = {"master_name": sentinel.master, "sentinel_kwargs": SENTINEL_CLIENT_OPTIONS}
    return {
        "broker_url": _sentinel_urls(settings.broker_url, sentinel),
        "result_backend": _sentinel_urls(settings.result_backend, sentinel),
        "broker_transport": "taskyard.plumbing.broker:SentinelTransport",
        "broker_transport_options": {**_transport_options(settings), **options},
        "result_backend_transport_options": options,
    }


def _sentinel_urls(url: str, sentinel: SentinelSpec) -> str:
    """``sentinel://[:password@]host:port/db`` for each sentinel, joined by ";"."""
    credentials = urlsplit(url).netloc.rpartition("@")[0]  # as written: quoted already
    at = f"{credentials}@" if credentials else ""
    db = int(parse_url(url).get("db", 0))
    hosts = [f"[{host}]" if ":" in host else host for host, _ in sentinel.addresses]
    return ";".join(
        f"sentinel://{at}{host}:{port}/{db}"  # not a Redis key
        for host, (_, port) in zip(hosts, sentinel.addresses, strict=True)
    )


def _transport_options(settings: BrokerSettings) -> dict[str, Any]:
    """A job whose worker died returns to its queue after the visibility timeout; kombu sweeps
    for such jobs every interval x throttle seconds (100 s by default), so sweep well within
    the timeout instead. kombu's pool holds 10 connections by default: a thousand greenlets
    acking at once would run out, and a job whose unacked record or ack fails is lost or
    runs twice, so the pool is as large as the setting says."""
    timeout = settings.visibility_timeout_s
    return {
        "visibility_timeout": timeout,
        "unacked_restore_interval": min(10.0, max(1.0, timeout / 4)),
        "unacked_restore_throttle": 1,
        "max_connections": settings.broker_max_connections,
    }
