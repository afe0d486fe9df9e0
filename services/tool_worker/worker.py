"""The tool worker: a Celery app on the `tools.<tool>` queues running one tool call per job.

Run: celery -A services.tool_worker.worker worker -Q tools.IPythonInterpreter --pool threads -c 4
"""

from __future__ import annotations

import logging
import threading
from functools import cache

from celery import Task, signals

from services.tool_worker.runner import run_tool_call
from shared import keys
from shared.celery_app import make_celery
from shared.events import EventKind
from shared.logs import setup_logging
from shared.registry import load_plugins
from shared.sandbox import SandboxProvider, make_sandbox_provider
from shared.schema import ToolCall
from shared.settings import get_settings
from shared.store import TaskStore

settings = get_settings()
setup_logging()
load_plugins(settings.plugin_modules)
app = make_celery(settings)
store = TaskStore.from_url(settings.redis_url)
log = logging.getLogger("taskyard.tool_worker")
_REAP_EVERY_S = 60.0


@cache
def sandboxes() -> SandboxProvider:
    """One provider per worker process, made on first use."""
    return make_sandbox_provider(settings)


@app.task(name=keys.TOOL_RUN_TASK, bind=True)
def tool_run(self: Task, task_id: str, step: int, tenant: str, session_id: str, call: dict) -> None:
    """Run one tool call of a task's step; the last result in enqueues the next step."""
    tool_call = ToolCall.model_validate(call)
    extra = {"task_id": task_id, "session_id": session_id, "step": step, "call_id": tool_call.id}
    if not store.has_tool_result(task_id, step, tool_call.id):
        log.info("tool call %s", tool_call.name, extra=extra)
        message = run_tool_call(
            tool_call,
            session_key=f"{tenant}:{session_id}",
            sandboxes=sandboxes(),
            settings=settings,
        )
        store.put_tool_result(task_id, step, tool_call.id, message)
        store.publish(task_id, EventKind.MESSAGE, message.model_dump(mode="json"))
    redelivered = bool((self.request.delivery_info or {}).get("redelivered"))
    _advance_if_complete(task_id, step, redelivered)


def _advance_if_complete(task_id: str, step: int, redelivered: bool) -> None:
    record = store.get(task_id)
    if record is None or record.terminal or record.step != step + 1:
        return
    done = store.tool_results(task_id, step, record.pending_calls)
    if len(done) < len(record.pending_calls):
        return
    # Exactly one job enqueues the next step; a redelivered job may again (the step is idempotent).
    if store.claim_advance(task_id, step) or redelivered:
        app.send_task(keys.AGENT_STEP_TASK, args=[task_id, step + 1], queue=keys.AGENT_QUEUE)


@signals.worker_ready.connect
def _start_reaper(**_: object) -> None:
    def reap() -> None:
        while not stop.wait(_REAP_EVERY_S):
            reap_idle = getattr(sandboxes(), "reap_idle", None)
            if reap_idle:
                reap_idle()

    threading.Thread(target=reap, name="sandbox-reaper", daemon=True).start()


@signals.worker_shutdown.connect
def _close_sandboxes(**_: object) -> None:
    stop.set()
    sandboxes().close_all()


stop = threading.Event()
