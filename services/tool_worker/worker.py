"""The tool worker: a Celery app on the `tools.<tool>` queues running one tool call per job,
and on the interpreter's queue the gateway's requests for sessions' files too. Each worker
also consumes a queue of its own, named after its Celery node name (`-n tools@%h`, distinct
per container or host): the jobs of the sessions whose interpreters it holds
(`services.tool_worker.placement`).

Run: celery -A services.tool_worker.worker worker -Q tools.IPythonInterpreter,tools.mcp \
    --pool threads -c 4
(`tools.mcp`: calls and listings of remote MCP servers; a local one's go with the interpreter)

This module only wires: the jobs run in `ToolCallRunner` (services/tool_worker/call_runner.py).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery import signals
from opentelemetry import trace
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from services.tool_worker.call_runner import ToolCallRunner
from services.tool_worker.errors import CallFailed
from services.tool_worker.metrics import watch_sandboxes
from taskyard.agentkit.registry import load_plugins
from taskyard.plumbing import keys
from taskyard.plumbing.celery_app import JobTask, make_celery
from taskyard.plumbing.logs import bind_job, setup_logging
from taskyard.plumbing.metrics import serve_metrics
from taskyard.plumbing.settings import ToolWorkerSettings, get_settings
from taskyard.plumbing.tracing import job_attributes, setup_tracing
from taskyard.runtime.jobs import McpListJob, SessionFilesJob, SessionForkJob, ToolRunJob
from taskyard.runtime.store.sandboxes import ToolWorkerId
from taskyard.sandbox import SandboxError

settings = get_settings(ToolWorkerSettings)
setup_logging("tool_worker")
setup_tracing("tool_worker", settings)
load_plugins(settings.plugin_modules)
app = make_celery(settings)
log = logging.getLogger("taskyard.tool_worker")

_MAX_RETRIES = 3
_runner: ToolCallRunner | None = None
_runner_lock = threading.Lock()


def runner(node: str | None = None) -> ToolCallRunner:
    """This process's runner, opened by the worker's start as its Celery node name
    (`-n tools@%h`: nothing per worker to configure); in a process that is no worker, by the
    first job, as the settings' label."""
    global _runner
    with _runner_lock:
        if _runner is None:
            me = ToolWorkerId(node or settings.sandbox_worker_label)
            _runner = ToolCallRunner.open(settings, me, app)
        return _runner


@app.task(
    name=keys.TOOL_RUN_TASK,
    bind=True,
    max_retries=_MAX_RETRIES,
    # Redis gone for longer than the store's own retries ride out: try the job again later.
    autoretry_for=(RedisConnectionError, RedisTimeoutError),
    retry_backoff=True,
    retry_jitter=True,
)
def tool_run(self: JobTask, payload: dict[str, Any]) -> None:
    """Run one tool call of a task's step; the result that completes the step pushes the
    next step's job with it."""
    job = ToolRunJob.model_validate(payload)
    ids = {"task_id": job.task_id, "session_id": job.session_id, "tenant": job.tenant}
    trace.get_current_span().set_attributes(
        {**job_attributes(**ids, step=job.step), "taskyard.tool": job.call.name}
    )
    retries = self.request.retries
    with bind_job(**ids, step=job.step, tool=job.call.name, call_id=job.call.id):
        try:
            runner().run_call(job, may_retry=retries < _MAX_RETRIES)
        except CallFailed as failed:
            raise self.retry(exc=failed.cause, countdown=2**retries) from failed.cause


@app.task(name=keys.FILES_TASK)
def session_files(payload: dict[str, Any]) -> None:
    """Serve the gateway's request for a session's files (nothing once it stopped waiting)."""
    runner().serve_files(SessionFilesJob.model_validate(payload))


@app.task(name=keys.MCP_LIST_TASK)
def mcp_list(payload: dict[str, Any]) -> None:
    """List an MCP server's tools for the agent worker waiting on the answer (a local server
    in the session's sandbox, so on the worker holding it)."""
    runner().list_mcp(McpListJob.model_validate(payload))


@app.task(name=keys.SESSION_FORK_TASK)
def fork_session(payload: dict[str, Any]) -> None:
    """Copy a session's interpreter for its fork (on the worker holding it, where the store
    sent the job) and answer the gateway waiting."""
    runner().fork_session(SessionForkJob.model_validate(payload))


@signals.celeryd_after_setup.connect
def _consume_own_queue(sender: str, instance: Any, **_: object) -> None:
    # Celery's way to add a queue derived from the node name, after -Q is applied.
    queue = ToolWorkerId(sender).queue
    instance.app.amqp.queues.select_add(queue)
    log.info("consuming %s, the queue of the sessions this worker holds", queue)


@signals.worker_init.connect
def _start_sandboxes(sender: Any, **_: object) -> None:
    """Fail fast: a worker whose sandboxes cannot run must not take tool jobs."""
    # `sender`: the WorkController, whose stubs lack the node name it has by now.
    started = runner(sender.hostname)
    try:
        started.start()
    except (SandboxError, ValueError) as exc:
        backend = settings.sandbox_backend
        log.critical("the %r sandbox backend cannot run here: %s", backend, exc)
        message = f"tool worker: the {backend!r} sandbox backend cannot run here: {exc}"
        raise SystemExit(message) from exc


@signals.worker_init.connect
def _say_artifact_expiry(**_: object) -> None:
    runner().say_artifact_expiry()


@signals.worker_init.connect
def _serve_metrics(**_: object) -> None:
    tools = runner().tools
    watch_sandboxes(lambda: tools.made_sandboxes)
    serve_metrics(settings)


@signals.worker_ready.connect
def _start_reaper(**_: object) -> None:
    runner().start_reaper()


@signals.worker_shutdown.connect
def _close_sandboxes(**_: object) -> None:
    if _runner is not None:
        _runner.stop()
