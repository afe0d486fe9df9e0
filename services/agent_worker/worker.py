"""The agent worker: a Celery app on the `agent` queue running one agent step per job.

Run: celery -A services.agent_worker.worker worker -Q agent --pool threads -c 4
"""

from __future__ import annotations

import logging

from celery import Task

from services.agent_worker.step import StepRunner
from shared import keys
from shared.actions import action_queue
from shared.celery_app import make_celery
from shared.llms import LLMError
from shared.logs import setup_logging
from shared.registry import load_plugins
from shared.schema import ToolCall
from shared.settings import get_settings
from shared.store import TaskStore
from shared.task import TaskRecord, TaskStatus

settings = get_settings()
setup_logging()
load_plugins(settings.plugin_modules)
app = make_celery(settings)
store = TaskStore.from_url(settings.redis_url)
log = logging.getLogger("taskyard.agent_worker")

_MAX_RETRIES = 8


def _transient(exc: Exception) -> bool:
    """Upstream trouble worth waiting out: unreachable, rate limited or a 5xx."""
    if not isinstance(exc, LLMError):
        return False
    return exc.status_code is None or exc.status_code == 429 or exc.status_code >= 500


def dispatch_tool(record: TaskRecord, step: int, call: ToolCall) -> None:
    app.send_task(
        keys.TOOL_RUN_TASK,
        args=[record.id, step, record.tenant, record.session_id, call.model_dump()],
        queue=action_queue(call.name),
    )


def enqueue_step(task_id: str, step: int) -> None:
    app.send_task(keys.AGENT_STEP_TASK, args=[task_id, step], queue=keys.AGENT_QUEUE)


runner = StepRunner(store, settings, dispatch_tool, enqueue_step)


@app.task(name=keys.AGENT_STEP_TASK, bind=True, max_retries=_MAX_RETRIES)
def agent_step(self: Task, task_id: str, step: int) -> None:
    """Run step `step` of task `task_id` (a stale or duplicate step does nothing)."""
    extra = {"task_id": task_id, "step": step}
    redelivered = bool((self.request.delivery_info or {}).get("redelivered"))
    try:
        runner.run(task_id, step, redelivered=redelivered)
    except Exception as exc:
        _retry_or_fail(self, task_id, exc, extra)


def _retry_or_fail(task: Task, task_id: str, exc: Exception, extra: dict) -> None:
    """Retry a transient upstream error with backoff (the task stays accepted meanwhile);
    end the task with the reason on anything else, never dropping it silently."""
    if _transient(exc):
        if task.request.retries >= _MAX_RETRIES:
            _fail(task_id, f"model upstream unavailable after {_MAX_RETRIES} retries: {exc}")
            return
        log.warning("model upstream error, retrying: %s", exc, extra=extra)
        raise task.retry(exc=exc, countdown=min(2**task.request.retries, 30)) from exc
    log.exception("agent step failed", extra=extra)
    _fail(task_id, f"agent step failed: {type(exc).__name__}: {exc}")


def _fail(task_id: str, reason: str) -> None:
    record = store.get(task_id)
    if record and not record.terminal:
        runner.end(record, TaskStatus.FAILED, reason)
