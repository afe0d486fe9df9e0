"""The floor every Celery hop of a task pays: a bare no-op task on the same Redis.

`python bench/_celery_floor.py worker REDIS_URL [POOL CONCURRENCY [taskyard]]` runs a worker
(one process; threads -c 16 unless told; with `taskyard`, Celery configured as taskyard's
services configure it, `taskyard.plumbing.celery_app`); `measure(redis_url)` times round trips from
one client and no-op throughput from 16; `drain(redis_url, jobs)` sends no-op jobs that store no
result (as taskyard's) to a `taskyard` worker and waits until it has taken and acked them all.
"""

from __future__ import annotations

import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import redis
from celery import Celery

from taskyard.plumbing import keys
from taskyard.plumbing.celery_app import make_celery
from taskyard.plumbing.settings import BrokerSettings

__all__ = ["drain", "make_app", "measure"]


def make_app(redis_url: str, taskyard: bool = False) -> Celery:
    if taskyard:
        urls = {"redis_url": f"{redis_url}/0", "broker_url": f"{redis_url}/5",
                "result_backend": f"{redis_url}/6"}  # fmt: skip
        app = make_celery(BrokerSettings(**urls))  # type: ignore[arg-type]
    else:
        app = Celery("floor", broker=f"{redis_url}/5", backend=f"{redis_url}/6")
        app.conf.update(task_acks_late=True, worker_prefetch_multiplier=1, broker_pool_limit=32,
                        worker_hijack_root_logger=False)  # fmt: skip

    @app.task(name="floor.noop")
    def noop() -> None:
        return None

    return app


def _ready(app: Celery) -> Celery:
    """The app with its broker connection and producer pools made here, before 16 threads send
    through them: made by the first threads at once, a later one setting the pools' limit
    (kombu's limit is process-wide, and another app of this run may have set another) resizes
    a pool an earlier one already holds ("Can't shrink pool when in use")."""
    _ = app.amqp.producer_pool  # makes `app.pool` too, setting the limit once, here
    return app


def measure(redis_url: str, round_trips: int = 300, burst: int = 2000) -> dict[str, float]:
    """p50/p99 round trip of one client (send, run, result back) and tasks/s of 16 clients."""
    app = _ready(make_app(redis_url))
    times = []
    for _ in range(round_trips):
        start = time.perf_counter()
        app.send_task("floor.noop").get(timeout=30)
        times.append(time.perf_counter() - start)
    start = time.perf_counter()
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda _: app.send_task("floor.noop"), range(burst)))
        list(pool.map(lambda r: r.get(timeout=60), results))
    rate = burst / (time.perf_counter() - start)
    cut = statistics.quantiles(times, n=100)
    return {"p50_ms": statistics.median(times) * 1e3, "p99_ms": cut[98] * 1e3, "tasks_s": rate}


def drain(redis_url: str, jobs: int, timeout_s: float = 300) -> None:
    """Send `jobs` no-op jobs from 16 threads, then wait until none is queued or unacked."""
    app = _ready(make_app(redis_url, taskyard=True))
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda _: app.send_task("floor.noop", ignore_result=True), range(jobs)))
    client = redis.Redis.from_url(f"{redis_url}/5")
    deadline = time.perf_counter() + timeout_s
    try:
        while client.llen(keys.AGENT_QUEUE) or client.zcard(keys.celery_taken()):
            assert time.perf_counter() < deadline, "the floor's worker never drained its queue"
            time.sleep(0.05)
    finally:
        client.close()


_WORKER_FLAGS = ["--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "WARNING"]

if __name__ == "__main__" and sys.argv[1:2] == ["worker"]:
    pool, concurrency = (sys.argv[3], sys.argv[4]) if len(sys.argv) > 4 else ("threads", "16")
    app = make_app(sys.argv[2], taskyard=sys.argv[5:6] == ["taskyard"])
    app.worker_main(["worker", "--pool", pool, "-c", concurrency, *_WORKER_FLAGS])
