"""The toolbox's calls: each pool thread runs them on one event loop of its own, kept
between calls, each call in its caller's context and alone (what it leaves running is
cancelled when it returns, as `asyncio.run` would)."""

from __future__ import annotations

import asyncio
import contextvars
import threading

from services.tool_worker.toolbox import Toolbox
from taskyard.plumbing.settings import ToolWorkerSettings

_JOB: contextvars.ContextVar[str] = contextvars.ContextVar("job", default="none")


def test_a_threads_calls_share_its_loop_in_their_callers_context_and_run_alone() -> None:
    toolbox = Toolbox(ToolWorkerSettings(sandbox_backend="local", sandbox_warm_pool=0))
    left: list[asyncio.Task[None]] = []

    async def call() -> tuple[asyncio.AbstractEventLoop, str]:
        left.append(asyncio.create_task(asyncio.sleep(30)))  # still running when it returns
        return asyncio.get_running_loop(), _JOB.get()

    _JOB.set("job 1")
    first_loop, first_job = toolbox.run_here(call())
    _JOB.set("job 2")
    second_loop, second_job = toolbox.run_here(call())
    elsewhere: list[asyncio.AbstractEventLoop] = []
    thread = threading.Thread(target=lambda: elsewhere.append(toolbox.run_here(call())[0]))
    thread.start()
    thread.join(10)
    assert first_loop is second_loop and not first_loop.is_closed()
    assert elsewhere and elsewhere[0] is not first_loop
    assert (first_job, second_job) == ("job 1", "job 2")
    assert len(left) == 3 and all(task.cancelled() for task in left)
    toolbox.close()
