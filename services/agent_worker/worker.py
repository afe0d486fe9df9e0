"""The agent worker: a Celery app on the `agent` queue running one agent step per job.

Run it on Celery's gevent pool, so a step waiting on the model holds a small greenlet, not a
thread; the steps themselves run on one event loop per process (`AgentRuntime`):

    celery -A services.agent_worker.worker worker -Q agent,webhooks -P gevent -c 1000

It also delivers webhooks (the `webhooks` queue; a pool of its own if given only that queue).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from celery import signals
from opentelemetry import trace
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from services.agent_worker.metrics import STEP_SECONDS
from services.agent_worker.retries import GiveUp, after_model_error
from services.agent_worker.runtime import AgentRuntime
from taskyard.agentkit.llms import LLMError
from taskyard.agentkit.registry import load_plugins
from taskyard.plumbing import keys
from taskyard.plumbing.celery_app import JobTask, make_celery
from taskyard.plumbing.logs import bind_job, setup_logging
from taskyard.plumbing.metrics import serve_metrics
from taskyard.plumbing.settings import AgentWorkerSettings, get_settings
from taskyard.plumbing.tracing import job_attributes, setup_tracing
from taskyard.runtime.jobs import AgentStepJob, ChildJob, WebhookJob

settings = get_settings(AgentWorkerSettings)
setup_logging("agent_worker")
setup_tracing("agent_worker", settings)
load_plugins(settings.plugin_modules)
app = make_celery(settings)
# Celery beat (`celery -A services.agent_worker.worker beat`) sends the sweep and the
# schedules' tick. A tick that expires unrun is no loss: the next one finds the same runs due
# (and a run whose time passed its grace meanwhile follows its schedule's `missed` policy).
app.conf.beat_schedule = {
    "sweep": {
        "task": keys.SWEEP_TASK,
        "schedule": settings.sweep_interval_s,
        "options": {"queue": keys.AGENT_QUEUE, "expires": settings.sweep_interval_s},
    },
    "schedules": {
        "task": keys.SCHEDULE_TASK,
        "schedule": settings.schedule_tick_s,
        "options": {"queue": keys.AGENT_QUEUE, "expires": settings.schedule_tick_s},
    },
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
def agent_step(self: JobTask, payload: dict[str, Any]) -> None:
    """Run one step of a task: its commit (or its end) pushes every job that follows."""
    job = AgentStepJob.model_validate(payload)
    ids = {"task_id": job.task_id, "session_id": job.session_id, "tenant": job.tenant}
    trace.get_current_span().set_attributes(job_attributes(**ids, step=job.step))
    # "retry" until known otherwise: a retry leaves by the exception Celery's retry raises.
    started, outcome = time.perf_counter(), "retry"
    with bind_job(**ids, step=job.step):
        try:
            runtime().run_step(job)
            outcome = "done"
        except Exception as exc:
            _retry_or_fail(self, job, exc)
            outcome = "failed"
        finally:
            STEP_SECONDS.labels(outcome).observe(time.perf_counter() - started)


@app.task(
    name=keys.CHILD_TASK,
    autoretry_for=(RedisConnectionError, RedisTimeoutError),
    retry_backoff=True,
    retry_jitter=True,
)
def start_child(payload: dict[str, Any]) -> None:
    """Start the child task an agent tool call asks for (see children.py)."""
    runtime().start_child(ChildJob.model_validate(payload))


@app.task(name=keys.WEBHOOK_TASK, bind=True, max_retries=None)
def deliver_webhooks(self: JobTask, payload: dict[str, Any]) -> None:
    """Deliver a task's webhook events not delivered yet. A short wait is a Celery countdown;
    a long backoff waits for the sweep (a countdown past the broker's visibility timeout
    would come back as a second copy)."""
    retry_in_s = runtime().deliver_webhooks(WebhookJob.model_validate(payload)).retry_in_s
    if retry_in_s is not None and retry_in_s <= settings.visibility_timeout_s / 4:
        raise self.retry(countdown=retry_in_s)


@app.task(name=keys.SWEEP_TASK)
def sweep() -> None:
    """Keep accepted tasks moving (see services/agent_worker/sweep.py): send what it finds lost."""
    runtime().send(runtime().sweep())


@app.task(name=keys.SCHEDULE_TASK)
def run_schedules() -> None:
    """Submit the tasks of the cron schedules that are due (see
    shared/taskyard/runtime/schedules/runner.py)."""
    runtime().run_schedules()


def _retry_or_fail(task: JobTask, job: AgentStepJob, exc: Exception) -> None:
    """Retry a transient upstream error with backoff (the task stays accepted meanwhile);
    end the task with the reason on anything else, never dropping it silently."""
    if isinstance(exc, LLMError) and exc.transient:
        wait = settings.llm_rate_limit_max_wait_s
        decision = after_model_error(exc, task.request.retries, _MAX_RETRIES, wait)
        if isinstance(decision, GiveUp):
            runtime().fail(job, decision.reason)
            return
        log.warning("model upstream error, retrying: %s", exc)
        runtime().waiting(job, decision)
        raise task.retry(exc=exc, countdown=decision.countdown_s) from exc
    log.exception("agent step failed")
    runtime().fail(job, f"agent step failed: {type(exc).__name__}: {exc}")


@signals.worker_init.connect
@signals.beat_init.connect
def _serve_metrics(**_: object) -> None:
    serve_metrics(settings)


@signals.worker_shutdown.connect
def _close_runtime(**_: object) -> None:
    if _runtime is not None:
        _runtime.close()
