"""Structured logs: one JSON object per line, in one format for every service (the proxy
included) and every library logging through them (Celery, uvicorn, kombu).

Each line carries the record's own time (when it was logged, not when it was written out),
its level, logger, service and message, and the ids of the job in hand: a job binds them once
(`bind_job`, structlog's contextvars) and every line logged while it runs carries them, on
whichever greenlet, thread or event loop its context travels to. Ids given as `extra=` on one
call are kept too.
"""

from __future__ import annotations

import _thread
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TextIO

import orjson
import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

__all__ = ["JOB_FIELDS", "bind_job", "setup_logging"]

# The ids a line may carry, bound per job or passed as `extra=`.
JOB_FIELDS = ("task_id", "session_id", "tenant", "step", "tool", "call_id")
# Libraries that configure their own handlers; their lines go through the root's instead.
_OWN_HANDLERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "celery", "taskyard")


@contextmanager
def bind_job(**ids: Any) -> Iterator[None]:
    """Every line logged inside carries these ids (None values are left out)."""
    with structlog.contextvars.bound_contextvars(**{k: v for k, v in ids.items() if v is not None}):
        yield


def setup_logging(service: str, level: str = "INFO", stream: TextIO | None = None) -> None:
    """JSON lines on `stream` (stderr) for every logger of the process, stdlib and structlog."""
    shared = _shared_processors(service)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                structlog.processors.EventRenamer("msg"),
                structlog.processors.JSONRenderer(serializer=_dumps),
            ],
        )
    )
    # A native lock, never gevent's: lines come from greenlets and from the native thread the
    # event loop runs on (taskyard.plumbing.loop). A gevent lock released by that thread may never
    # wake the greenlet waiting on it: the agent worker's consumer once stopped for good there, in
    # `Handler.acquire`. A native lock is held only while one line is written.
    handler.lock = _thread.RLock()
    logging._lock = _thread.RLock()  # type: ignore[attr-defined]  # getLogger's, likewise
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in _OWN_HANDLERS:
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )


def _shared_processors(service: str) -> list[Processor]:
    def add_service(_: WrappedLogger, __: str, event: EventDict) -> EventDict:
        event["service"] = service
        return event

    return [
        _record_time,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        add_service,
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.ExtraAdder(allow=JOB_FIELDS),
    ]


def _record_time(_: WrappedLogger, __: str, event: EventDict) -> EventDict:
    # A stdlib record knows when it was made; a structlog call is made now.
    record: logging.LogRecord | None = event.get("_record")
    created = record.created if record is not None else datetime.now(UTC).timestamp()
    event["ts"] = datetime.fromtimestamp(created, UTC).isoformat(timespec="microseconds")
    return event


def _dumps(data: Any, **_: Any) -> str:
    return orjson.dumps(data, default=repr).decode()
