"""`LoopThread.run` under gevent: a greenlet waits for the loop thread's outcome even when its
hub has nothing else to watch (outside a Celery worker), and many greenlets wait at once."""

from __future__ import annotations

import subprocess
import sys

_ALONE_UNDER_GEVENT = """
from gevent import monkey
monkey.patch_all()
import asyncio
import gevent
from taskyard.plumbing.loop import LoopThread

loop = LoopThread()

async def slow(value):
    await asyncio.sleep(0.3)
    return value

assert loop.run(slow(1)) == 1  # the hub watches nothing else meanwhile
waits = [gevent.spawn(loop.run, slow(n)) for n in range(200)]
gevent.joinall(waits, raise_error=True)
assert sorted(g.value for g in waits) == list(range(200))
print("done")
"""


def test_a_greenlet_waits_on_the_loop_with_nothing_else_to_watch() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _ALONE_UNDER_GEVENT], capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == "done", result.stderr[-2000:]
