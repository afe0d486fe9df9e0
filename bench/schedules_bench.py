"""What one schedules tick costs: N schedules all due at once (say, every morning at nine),
each submitting its task, against a Redis of this run's own on loopback. Prints the tick's
wall time per round and the runs per second; nothing is asserted.

    .venv/bin/python bench/schedules_bench.py [--schedules N] [--rounds ROUNDS]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import tempfile
import time

import redis

from devstack.procs import free_port
from taskyard.plumbing.celery_app import make_celery
from taskyard.plumbing.settings import AgentWorkerSettings
from taskyard.runtime.schedules import Schedule, ScheduleRequest
from taskyard.runtime.schedules.runner import ScheduleRunner
from taskyard.runtime.store import TaskStore
from taskyard.runtime.store import schedules as stored

T0 = 1_800_000_000.0  # a multiple of five minutes
EVERY_5_MIN = "*/5 * * * *"


async def _measure(url: str, n: int, rounds: int) -> None:
    settings = AgentWorkerSettings(redis_url=f"{url}/0", broker_url=f"{url}/1")
    store = TaskStore.from_url(settings.redis_url, settings.broker_url)
    task = ScheduleRequest.model_validate({"cron": EVERY_5_MIN, "task": {"input": "x"}}).task
    for _ in range(n):
        made = Schedule(tenant="bench", cron=EVERY_5_MIN, missed="run_once", task=task,
                        created_at=T0, next_run_at=T0 + 300)  # fmt: skip
        await stored.create(store, made, max_per_tenant=n)
    runner = ScheduleRunner(store, make_celery(settings), settings)
    for round_ in range(1, rounds + 1):
        runner.clock = lambda at=T0 + 300 * round_ + 1: at
        start = time.perf_counter()
        runs = await runner.tick()
        took = time.perf_counter() - start
        print(f"round {round_}: {len(runs)} runs in {took:.3f} s: {len(runs) / took:,.0f} runs/s, "
              f"{took / len(runs) * 1000:.2f} ms a run")  # fmt: skip
    await store.close()


def main(n: int = 500, rounds: int = 5) -> None:
    port, data = free_port(), tempfile.mkdtemp(prefix="schedules-bench-")
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", data], stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        client = redis.Redis(port=port)
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        asyncio.run(_measure(f"redis://127.0.0.1:{port}", n, rounds))
    finally:
        server.terminate()
        server.wait(timeout=10)
        shutil.rmtree(data, ignore_errors=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--schedules", type=int, default=500, help="schedules due at once")
    parser.add_argument("--rounds", type=int, default=5, help="ticks measured")
    return parser


if __name__ == "__main__":
    args = _parser().parse_args()
    main(args.schedules, args.rounds)
