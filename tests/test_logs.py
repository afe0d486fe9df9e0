"""One JSON line per record, with the record's own time and the job's ids bound once."""

from __future__ import annotations

import asyncio
import io
import logging
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime

import orjson
import pytest
import structlog

from taskyard.plumbing.logs import bind_job, setup_logging
from taskyard.plumbing.loop import LoopThread


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


_GREENLETS_AND_THE_LOOP_LOG_AT_ONCE = """
from gevent import monkey
monkey.patch_all()
import logging, os, sys
import gevent
from taskyard.plumbing.logs import setup_logging
from taskyard.plumbing.loop import LoopThread

setup_logging("test", stream=open(os.devnull, "w"))
log = logging.getLogger("taskyard.test")
loop = LoopThread()

async def from_the_loop(n):
    for i in range(n):
        log.info("loop %d", i)

def from_a_greenlet(n):
    for i in range(n):
        log.info("greenlet %d", i)
        gevent.sleep(0)

for _ in range(20):
    greenlets = [gevent.spawn(from_a_greenlet, 200) for _ in range(20)]
    loop.run(from_the_loop(4000))
    gevent.joinall(greenlets)
print("done")
"""


def test_greenlets_and_the_loop_thread_log_at_once_without_a_deadlock() -> None:
    # Under gevent, a handler lock that is gevent's may be taken by the loop's native thread
    # while a greenlet waits on it, and that greenlet then never wakes (the agent worker's
    # consumer stopped so). The handler's lock is a native one.
    result = subprocess.run(
        [sys.executable, "-c", _GREENLETS_AND_THE_LOOP_LOG_AT_ONCE],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.stdout.strip() == "done", result.stderr[-2000:]


@pytest.mark.parametrize("wanted", [False, True])
def test_celerys_per_job_lines_only_when_asked_for(lines: io.StringIO, wanted: bool) -> None:
    from celery.app import trace
    from celery.worker import strategy

    from taskyard.plumbing.celery_app import make_celery
    from taskyard.plumbing.settings import BrokerSettings

    make_celery(BrokerSettings(celery_job_logs=wanted))
    try:
        job = {"id": "j1", "name": "agent.step", "runtime": 0.001, "return_value": None}
        trace.info(trace.LOG_SUCCESS, job)
        strategy.logger.info(trace.LOG_RECEIVED, job)
        trace.info(trace.LOG_RETRY, {**job, "exc": "Retry in 2s"})
        strategy.logger.error("Received invalid task message")
    finally:
        make_celery(BrokerSettings())  # the default again
    said = [line["msg"] for line in _read(lines)]
    per_job = ["Task agent.step[j1] succeeded in 0.001s: None", "Task agent.step[j1] received"]
    kept = ["Task agent.step[j1] retry: Retry in 2s", "Received invalid task message"]
    assert said == (per_job + kept if wanted else kept)
