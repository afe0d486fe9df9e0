"""One JSON line per record, with the record's own time and the job's ids bound once."""

from __future__ import annotations

import asyncio
import io
import logging
import time
from collections.abc import Iterator
from datetime import datetime

import orjson
import pytest
import structlog

from shared.logs import bind_job, setup_logging
from shared.loop import LoopThread


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    out = io.StringIO()
    setup_logging("test_service", stream=out)
    yield out
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()


def _read(out: io.StringIO) -> list[dict]:
    return [orjson.loads(line) for line in out.getvalue().splitlines()]


def test_a_line_carries_the_records_own_time_and_the_bound_ids(lines: io.StringIO) -> None:
    handler = logging.getLogger().handlers[0]
    record = logging.LogRecord("taskyard.x", logging.INFO, __file__, 1, "made %s", ("early",), None)
    record.created -= 60  # written out a minute after it was made
    with bind_job(task_id="t1", session_id="s1", tenant="acme", step=2):
        handler.handle(record)
    (line,) = _read(lines)
    assert line["msg"] == "made early"
    assert line["level"] == "info" and line["logger"] == "taskyard.x"
    assert line["service"] == "test_service"
    assert (line["task_id"], line["session_id"], line["tenant"], line["step"]) == (
        "t1", "s1", "acme", 2,
    )  # fmt: skip
    assert abs(datetime.fromisoformat(line["ts"]).timestamp() - (time.time() - 60)) < 5


def test_ids_reach_the_loop_thread_and_end_with_the_job(lines: io.StringIO) -> None:
    log = logging.getLogger("taskyard.test")

    async def step() -> None:
        log.info("on the loop")

    loop = LoopThread()
    try:
        with bind_job(task_id="t2", step=0):
            loop.run(step())
        log.info("after the job")
    finally:
        loop.close()
    on_loop, after = _read(lines)
    assert on_loop["task_id"] == "t2" and on_loop["step"] == 0
    assert "task_id" not in after


def test_extra_ids_exceptions_and_libraries_loggers(lines: io.StringIO) -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("taskyard.test").exception("failed", extra={"call_id": "c1"})
    logging.getLogger("celery.worker").warning("from a library")
    asyncio.run(_structlog_call())
    failed, library, native = _read(lines)
    assert failed["call_id"] == "c1" and "ValueError: boom" in failed["exception"]
    assert library["logger"] == "celery.worker" and library["level"] == "warning"
    assert native["msg"] == "structlog too" and native["task_id"] == "t3"


async def _structlog_call() -> None:
    with bind_job(task_id="t3"):
        structlog.get_logger("taskyard.native").info("structlog too")
