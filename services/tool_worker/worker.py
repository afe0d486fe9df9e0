"""The tool worker: a Celery app on the `tools.<tool>` queues running one tool call per job.

Run: celery -A services.tool_worker.worker worker -Q tools.IPythonInterpreter --pool threads -c 4
"""

from __future__ import annotations

import logging
import threading

from celery import Task, signals

from services.tool_worker.runner import ToolRunner
from shared import keys
from shared.celery_app import make_celery
from shared.events import EventKind
from shared.logs import setup_logging
from shared.registry import load_plugins
from shared.sandbox import SandboxError
from shared.schema import ActionReturn, ActionStatusCode, AgentMessage, ToolCall
from shared.settings import get_settings
from shared.store import TaskStore

settings = get_settings()
setup_logging()
load_plugins(settings.plugin_modules)
app = make_celery(settings)
store = TaskStore.from_url(settings.redis_url)
log = logging.getLogger("taskyard.tool_worker")
tools = ToolRunner(settings)
_REAP_EVERY_S = 60.0
_MAX_RETRIES = 3


@app.task(name=keys.TOOL_RUN_TASK, bind=True, max_retries=_MAX_RETRIES)
def tool_run(self: Task, task_id: str, step: int, tenant: str, session_id: str, call: dict) -> None:
    """Run one tool call of a task's step; the last result in enqueues the next step."""
    tool_call = ToolCall.model_validate(call)
    extra = {"task_id": task_id, "session_id": session_id, "step": step, "call_id": tool_call.id}
    if not store.has_tool_result(task_id, step, tool_call.id):
        log.info("tool call %s", tool_call.name, extra=extra)
        try:
            message = tools.run(tool_call, f"{tenant}:{session_id}")
        except Exception as exc:  # the worker's own trouble: retry, then tell the model
            if self.request.retries < _MAX_RETRIES:
                log.warning("tool call failed, retrying: %s", exc, extra=extra)
                raise self.retry(exc=exc, countdown=2**self.request.retries) from exc
            log.exception("tool call failed for good", extra=extra)
            message = _worker_error(tool_call, exc)
        store.put_tool_result(task_id, step, tool_call.id, message)
        store.publish(task_id, EventKind.MESSAGE, message.model_dump(mode="json"))
    redelivered = bool((self.request.delivery_info or {}).get("redelivered"))
    _advance_if_complete(task_id, step, redelivered)


def _worker_error(call: ToolCall, exc: Exception) -> AgentMessage:
    """A result the model can read when the tool could not run at all."""
    ret = ActionReturn(
        type=call.name,
        state=ActionStatusCode.API_ERROR,
        errmsg=f"the tool could not run ({type(exc).__name__}: {exc}); try again or do without",
        args=call.parameters if isinstance(call.parameters, dict) else None,
    )
    return AgentMessage(sender=call.name, content=ret, extra_info={"tool_call_id": call.id})


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


@signals.worker_init.connect
def _start_sandboxes(**_: object) -> None:
    """Fail fast: a worker whose sandboxes cannot run must not take tool jobs."""
    backend = settings.sandbox_backend
    try:
        removed = tools.start()
    except (SandboxError, ValueError) as exc:
        log.critical("the %r sandbox backend cannot run here: %s", backend, exc)
        message = f"tool worker: the {backend!r} sandbox backend cannot run here: {exc}"
        raise SystemExit(message) from exc
    log.info("sandboxes (%s) ready; removed %d left by an earlier run", backend, removed)


@signals.worker_ready.connect
def _start_reaper(**_: object) -> None:
    def reap() -> None:
        while not stop.wait(_REAP_EVERY_S):
            tools.reap_idle()

    threading.Thread(target=reap, name="sandbox-reaper", daemon=True).start()


@signals.worker_shutdown.connect
def _close_sandboxes(**_: object) -> None:
    stop.set()
    tools.close()


stop = threading.Event()
