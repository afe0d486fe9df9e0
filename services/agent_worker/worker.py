"""The agent worker: a Celery app on the `agent` queue running one agent step per job.

Run it on Celery's gevent pool, so a step waiting on the model holds a small greenlet, not a
thread; the steps themselves run on one event loop per process (`AgentRuntime`):

    celery -A services.agent_worker.worker worker -Q agent,webhooks -P gevent -c 1000

It also delivers webhooks (the `webhooks` queue; a pool of its own if given only that queue).
"""

from __future__ import annotations

import logging
import threading

from celery import Task, signals
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from services.agent_worker.runtime import AgentRuntime
from shared import keys
from shared.celery_app import make_celery
from shared.jobs import AgentStepJob, ChildJob, Job, WebhookJob, enqueue
from shared.llms import LLMError
from shared.logs import setup_logging
from shared.registry import load_plugins
from shared.settings import get_settings

settings = get_settings()
setup_logging()
load_plugins(settings.plugin_modules)
app = make_celery(settings)
# Celery beat (`celery -A services.agent_worker.worker beat`) sends the sweep.
app.conf.beat_schedule = {
    "sweep": {
        "task": keys.SWEEP_TASK,
        "schedule": settings.sweep_interval_s,
        "options": {"queue": keys.AGENT_QUEUE, "expires": settings.sweep_interval_s},
    }
}
log = logging.getLogger("taskyard.agent_worker")

_MAX_RETRIES = 8
_runtime: AgentRuntime | None = None
_runtime_lock = threading.Lock()


def runtime() -> AgentRuntime:
    """This process's runtime, started by the first job."""
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            _runtime = AgentRuntime(settings, app)
        return _runtime


@app.task(name=keys.AGENT_STEP_TASK, bind=True, max_retries=_MAX_RETRIES)
def agent_step(self: Task, payload: dict) -> None:
    """Run one step of a task, then send the jobs it leads to."""
    job = AgentStepJob.model_validate(payload)
    try:
        jobs = runtime().run_step(job)
    except Exception as exc:
        jobs = _retry_or_fail(self, job, exc)
    send(jobs)


@app.task(
    name=keys.CHILD_TASK,
    autoretry_for=(RedisConnectionError, RedisTimeoutError),
    retry_backoff=True,
    retry_jitter=True,
)
def start_child(payload: dict) -> None:
    """Start the child task an agent tool call asks for (see children.py)."""
    runtime().start_child(ChildJob.model_validate(payload))


@app.task(name=keys.WEBHOOK_TASK, bind=True, max_retries=None)
def deliver_webhooks(self: Task, payload: dict) -> None:
    """Deliver a task's webhook events not delivered yet. A short wait is a Celery countdown;
    a long backoff waits for the sweep (a countdown past the broker's visibility timeout
    would come back as a second copy)."""
    retry_in_s = runtime().deliver_webhooks(WebhookJob.model_validate(payload)).retry_in_s
    if retry_in_s is not None and retry_in_s <= settings.visibility_timeout_s / 4:
        raise self.retry(countdown=retry_in_s)


@app.task(name=keys.SWEEP_TASK)
def sweep() -> None:
    """Keep accepted tasks moving (see services/agent_worker/sweep.py)."""
    send(runtime().sweep())


def send(jobs: list[Job]) -> None:
    for job in jobs:
        enqueue(app, job)


def _retry_or_fail(task: Task, job: AgentStepJob, exc: Exception) -> list[Job]:
    """Retry a transient upstream error with backoff (the task stays accepted meanwhile);
    end the task with the reason on anything else, never dropping it silently."""
    extra = {"task_id": job.task_id, "session_id": job.session_id, "step": job.step}
    if isinstance(exc, LLMError) and exc.transient:
        if task.request.retries >= _MAX_RETRIES:
            reason = f"model upstream unavailable after {_MAX_RETRIES} retries: {exc}"
            return runtime().fail(job, reason)
        log.warning("model upstream error, retrying: %s", exc, extra=extra)
        raise task.retry(exc=exc, countdown=min(2**task.request.retries, 30)) from exc
    log.exception("agent step failed", extra=extra)
    return runtime().fail(job, f"agent step failed: {type(exc).__name__}: {exc}")


@signals.worker_shutdown.connect
def _close_runtime(**_: object) -> None:
    if _runtime is not None:
        _runtime.close()
