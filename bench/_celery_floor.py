"""The floor every Celery hop of a task pays: a bare no-op task on the same Redis.

`python bench/_celery_floor.py worker REDIS_URL` runs a worker (threads pool, one process);
`measure(redis_url)` times round trips from one client and no-op throughput from 16.
"""

from __future__ import annotations

import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from celery import Celery

__all__ = ["make_app", "measure"]


def make_app(redis_url: str) -> Celery:
    app = Celery("floor", broker=f"{redis_url}/5", backend=f"{redis_url}/6")
    app.conf.update(task_acks_late=True, worker_prefetch_multiplier=1, broker_pool_limit=32,
                    worker_hijack_root_logger=False)  # fmt: skip

    @app.task(name="floor.noop")
    def noop() -> None:
        return None

    return app


def measure(redis_url: str, round_trips: int = 300, burst: int = 2000) -> dict[str, float]:
    """p50/p99 round trip of one client (send, run, result back) and tasks/s of 16 clients."""
    app = make_app(redis_url)
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


_WORKER_FLAGS = ["--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "WARNING"]

if __name__ == "__main__" and sys.argv[1:2] == ["worker"]:
    make_app(sys.argv[2]).worker_main(["worker", "--pool", "threads", "-c", "16", *_WORKER_FLAGS])
