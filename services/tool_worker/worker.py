"""The tool worker: a Celery app on the `tools.<tool>` queues running one tool call per job,
and on the interpreter's queue the gateway's requests for sessions' files too. Each worker
also consumes a queue of its own, named after its Celery node name (`-n tools@%h`, distinct
per container or host): the jobs of the sessions whose interpreters it holds
(`services.tool_worker.placement`).

Run: celery -A services.tool_worker.worker worker -Q tools.IPythonInterpreter,tools.mcp \
    --pool threads -c 4
(`tools.mcp`: calls and listings of remote MCP servers; a local one's go with the interpreter)
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

from celery import signals
from opentelemetry import trace
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from services.tool_worker.artifacts import ArtifactKeeper
from services.tool_worker.cells import RedisCellLog
from services.tool_worker.files import FileLimits, serve
from services.tool_worker.metrics import TOOL_CALL_SECONDS, watch_sandboxes
from services.tool_worker.placement import Placement
from services.tool_worker.runner import ToolRunner
from shared import keys
from shared.actions.mcp.listing import ListingExchange
from shared.cancel import CancelWatch
from shared.celery_app import JobTask, make_celery
from shared.files.artifacts import ArtifactStore, ArtifactStoreUnavailable, make_artifact_store
from shared.files.transfer import FileTransfer
from shared.jobs import (
    AgentStepJob,
    Envelope,
    McpListJob,
    SessionFilesJob,
    ToolRunJob,
    envelope,
    sticky_session,
)
from shared.logs import bind_job, setup_logging
from shared.loop import LoopThread
from shared.metrics import serve_metrics
from shared.redis_clients import async_client
from shared.registry import load_plugins
from shared.sandbox import SandboxError
from shared.schema import ActionReturn, ActionStatusCode, AgentMessage, ToolCall
from shared.settings import ToolWorkerSettings, get_settings
from shared.store import CallClaim, TaskStore, ToolResultStored
from shared.store.sandboxes import SandboxDirectory, ToolWorkerId
from shared.text import replace_lone_surrogates
from shared.tracing import job_attributes, setup_tracing

settings = get_settings(ToolWorkerSettings)
setup_logging("tool_worker")
setup_tracing("tool_worker", settings)
load_plugins(settings.plugin_modules)
app = make_celery(settings)
log = logging.getLogger("taskyard.tool_worker")
tools = ToolRunner(settings)
_REAP_EVERY_S = min(60.0, settings.sandbox_idle_s / 2)
_MAX_RETRIES = 3
# This worker: its Celery node name, known once Celery names it (`celeryd_init`); a process
# that is no worker (a test importing this module) is the settings' label.
_me = ToolWorkerId(settings.sandbox_worker_label)
# How long a session's sandbox record outlives its interpreter's last use: a session coming
# back within a day of its interpreter's expiry is told why its state is gone.
_RECORD_TTL_S = settings.sandbox_idle_s + 86400


class _Store:
    """The async store on a loop of its own, for this worker's threads, and the watch that
    hears a task's cancel there."""

    def __init__(self, redis: ToolWorkerSettings) -> None:
        self.loop = LoopThread("tool-store")
        self.store: TaskStore = self.loop.run(_open_store(redis))
        self.transfer: FileTransfer = self.loop.run(_open_transfer(redis))
        self.cancels = CancelWatch(self.store.r, on_forgotten=tools.release)
        self.loop.run(_listen(self.cancels))
        self.artifact_store: ArtifactStore = self.loop.run(_open_artifacts(redis))
        self.artifacts = ArtifactKeeper(self.artifact_store, self.store.publish)
        self.listings = ListingExchange(self.store.r, settings.mcp_tools_ttl_s)
        self.cells = RedisCellLog(self.store.r, self.loop, _RECORD_TTL_S)
        directory = SandboxDirectory(self.store, _RECORD_TTL_S)
        beat_s, dead_s = settings.tool_worker_beat_s, settings.tool_worker_dead_s
        self.placement = Placement(
            directory, self.loop, _me, tools, beat_s, dead_s, settings.sandbox_idle_s
        )


async def _open_store(redis: ToolWorkerSettings) -> TaskStore:
    return TaskStore.from_settings(redis, "taskyard-tool-worker")


async def _open_transfer(redis: ToolWorkerSettings) -> FileTransfer:
    client = async_client(redis.redis_url, redis.sentinel, client_name="taskyard-tool-worker-files")
    return FileTransfer(client, settings.files_timeout_s)


async def _open_artifacts(redis: ToolWorkerSettings) -> ArtifactStore:
    # On this worker's store (the Redis backend's home), made on the loop that uses it.
    return make_artifact_store(redis)


async def _listen(cancels: CancelWatch) -> None:
    asyncio.get_running_loop().create_task(cancels.listen())
    await asyncio.wait_for(cancels.ready.wait(), 10)


_store: _Store | None = None
_store_lock = threading.Lock()


def _shared_store() -> _Store:
    global _store
    with _store_lock:
        if _store is None:
            _store = _Store(settings)
        return _store


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
    with bind_job(**ids, step=job.step, tool=job.call.name, call_id=job.call.id):
        _run_job(self, job)


def _run_job(task: JobTask, job: ToolRunJob) -> None:
    shared = _shared_store()
    if sticky_session(job) and _forwarded(shared, job):
        return
    next_step = envelope(app, AgentStepJob.after_tools(job))
    claimed = _claim(shared, job)
    if claimed == "busy":  # a duplicate of this job runs it now, and will store its result
        log.info("tool call already running elsewhere; not run again")
        return
    if claimed == "done":  # only look whether the step's results are complete
        _store_result(shared, job, None, next_step)
        return
    try:
        message = _run_claimed(task, job)
        # Its claim is freed with its result: until then a duplicate must not run it.
        _store_result(shared, job, message, next_step, _claim_of(job))
    except BaseException:
        _release(shared, job)  # its retry (or a re-send) may run it
        raise


def _run_claimed(task: JobTask, job: ToolRunJob) -> AgentMessage:
    shared = _shared_store()
    # A cancel of the task stops the session's running cell (its result is then refused).
    with shared.cancels.watch(job.task_id, lambda: tools.interrupt(job.session_key)):
        return _keep_artifacts(shared, job, _timed_call(task, job))


def _forwarded(shared: _Store, job: ToolRunJob | SessionFilesJob | McpListJob) -> bool:
    """Whether the job belongs to the live worker holding its session, and went there."""
    claim = shared.placement.claim(job.session_key)
    if claim.verdict != "forward":
        return False
    log.info("session held by another tool worker; job forwarded to %s", claim.detail)
    shared.placement.forward(envelope(app, job))
    return True


def _claim(shared: _Store, job: ToolRunJob) -> str:
    """Whether this job runs the call (`claimed`): not if its result is in (`done`), nor
    while a duplicate of the job runs it (`busy`: it would run twice in the session's
    interpreter). A claim outlives the longest call; a dead worker's lapses then, or at once
    when the worker starts again."""
    ttl_s = settings.stall_s + settings.sandbox_timeout_s
    claim = shared.store.claim_call(job.task_id, job.step, job.call.id, _me.node, ttl_s)
    return shared.loop.run(claim)


def _claim_of(job: ToolRunJob) -> CallClaim:
    session = job.session_key if tools.has_sandbox(job.session_key) else None
    return CallClaim(_me.node, session, _RECORD_TTL_S)


def _release(shared: _Store, job: ToolRunJob) -> None:
    try:
        shared.loop.run(shared.store.release_call(job.task_id, job.step, job.call.id, _me.node))
    except (RedisConnectionError, RedisTimeoutError):  # it lapses on its own
        log.warning("could not release a tool-call claim")


def _timed_call(task: JobTask, job: ToolRunJob) -> AgentMessage:
    started, outcome = time.perf_counter(), "crashed"
    try:
        message = _run_call(task, job)
        failed = isinstance(message.content, ActionReturn) and message.content.errmsg
        outcome = "error" if failed else "ok"
        return message
    finally:
        elapsed = time.perf_counter() - started
        TOOL_CALL_SECONDS.labels(job.call.name, outcome).observe(elapsed)


def _run_call(task: JobTask, job: ToolRunJob) -> AgentMessage:
    log.info("tool call %s", job.call.name)
    try:
        return tools.run_job(job)
    except Exception as exc:  # the worker's own trouble: retry, then tell the model
        if task.request.retries < _MAX_RETRIES:
            log.warning("tool call failed, retrying: %s", exc)
            raise task.retry(exc=exc, countdown=2**task.request.retries) from exc
        log.exception("tool call failed for good")
        return _worker_error(job.call, exc, "the tool could not run")


def _keep_artifacts(shared: _Store, job: ToolRunJob, message: AgentMessage) -> AgentMessage:
    """The result with its artifacts in the artifact store; if that fails, without them
    (their bytes never go into the task's messages) and the model is told."""
    if not isinstance(message.content, ActionReturn) or not message.content.artifacts:
        return message  # nothing to keep: no trip to the store's loop
    try:
        return shared.loop.run(shared.artifacts.keep(job, message))
    except Exception as exc:
        log.exception("artifacts could not be kept")
        note = f"[its figures and tables could not be kept ({type(exc).__name__})]"
        ret = message.content.model_copy(update={"artifacts": None})
        ret.result = [*(ret.result or []), {"type": "text", "content": note}]
        return message.model_copy(update={"content": ret})


@app.task(name=keys.FILES_TASK)
def session_files(payload: dict[str, Any]) -> None:
    """Serve the gateway's request for a session's files (nothing once it stopped waiting)."""
    job = SessionFilesJob.model_validate(payload)
    shared = _shared_store()
    if _forwarded(shared, job):
        return
    transfer = shared.transfer
    upload = None
    if job.op == "write":
        upload = shared.loop.run(transfer.take_upload(job.request_id, job.tenant, job.session_id))
    if job.expired:
        log.info("files request %s expired unserved", job.request_id)
        return
    reply, data = serve(job, tools.sandboxes(), upload, FileLimits.from_settings(settings))
    shared.loop.run(transfer.answer(job.request_id, reply, data))


@app.task(name=keys.MCP_LIST_TASK)
def mcp_list(payload: dict[str, Any]) -> None:
    """List an MCP server's tools for the agent worker waiting on the answer (a local server
    in the session's sandbox, so on the worker holding it)."""
    job = McpListJob.model_validate(payload)
    shared = _shared_store()
    if sticky_session(job) and _forwarded(shared, job):
        return
    if job.expired:
        log.info("MCP listing %s expired unserved", job.request_id)
        return
    with bind_job(tenant=job.tenant, session_id=job.session_id, tool=job.server.name):
        listing = tools.mcp().list(job)
    if listing.error is not None:
        log.warning("MCP server not listed: %s", listing.error)
    answer = shared.listings.answer(job.request_id, job.tenant, job.session_id, job.server, listing)
    shared.loop.run(answer)


def _store_result(
    shared: _Store,
    job: ToolRunJob,
    message: AgentMessage | None,
    next_step: Envelope,
    claim: CallClaim | None = None,
) -> ToolResultStored:
    """Store the call's result (None: only check the step's results), with the next step's
    job if it completes the step. A result that cannot be stored (a value no JSON encoder
    takes) is replaced by an error the model reads, so the step never waits on it for good."""

    def put(result: AgentMessage | None) -> ToolResultStored:
        store = shared.store
        stored = store.put_tool_result(job.task_id, job.step, job.call.id, result, next_step, claim)
        return shared.loop.run(stored)

    try:
        return put(message)
    except Exception as exc:
        if message is None:
            raise  # nothing of the tool's failed here: Redis did
        log.exception("tool result could not be stored; the model is told")
        return put(_worker_error(job.call, exc, "its result could not be stored"))


def _worker_error(call: ToolCall, exc: Exception, what: str) -> AgentMessage:
    """A result the model can read when the tool could not run, or its result not be kept."""
    ret = ActionReturn(
        type=call.name,
        state=ActionStatusCode.API_ERROR,
        # The exception may quote the tool's output, lone surrogates and all.
        errmsg=replace_lone_surrogates(
            f"{what} ({type(exc).__name__}: {exc}); try again or do without"
        ),
        args=call.parameters if isinstance(call.parameters, dict) else None,
    )
    return AgentMessage.tool_result(call, ret)


@signals.celeryd_init.connect
def _name_worker(sender: str, **_: object) -> None:
    """This worker is its Celery node name (`-n tools@%h`): nothing per worker to configure."""
    global _me
    _me = ToolWorkerId(sender)


@signals.celeryd_after_setup.connect
def _consume_own_queue(sender: str, instance: Any, **_: object) -> None:
    # Celery's way to add a queue derived from the node name, after -Q is applied.
    instance.app.amqp.queues.select_add(_me.queue)
    log.info("consuming %s, the queue of the sessions this worker holds", _me.queue)


@signals.worker_init.connect
def _start_sandboxes(**_: object) -> None:
    """Fail fast: a worker whose sandboxes cannot run must not take tool jobs."""
    backend = settings.sandbox_backend
    shared = _shared_store()
    tools.keep_cells(shared.cells)  # before the actions are made
    try:
        removed = tools.start(_me.node)
    except (SandboxError, ValueError) as exc:
        log.critical("the %r sandbox backend cannot run here: %s", backend, exc)
        message = f"tool worker: the {backend!r} sandbox backend cannot run here: {exc}"
        raise SystemExit(message) from exc
    log.info("sandboxes (%s) ready; removed %d left by an earlier run", backend, removed)
    freed = shared.loop.run(shared.store.release_worker_claims(_me.node))
    log.info("freed %d tool-call claims held by an earlier run", freed)


@signals.worker_init.connect
def _say_artifact_expiry(**_: object) -> None:
    """Say how artifacts expire; loudly where nothing will (an S3 bucket without the lifecycle
    rule) or the store does not answer."""
    shared = _shared_store()
    try:
        expiry = shared.loop.run(shared.artifact_store.expiry())
    except ArtifactStoreUnavailable as exc:
        log.warning("the artifact store does not answer: %s", exc)
        return
    if expiry.after_s is None:
        log.warning("artifacts never expire: %s (see docs/deployment.md)", expiry.how)
    else:
        log.info("artifacts (%s backend): %s", settings.artifacts_backend, expiry.how)


@signals.worker_init.connect
def _serve_metrics(**_: object) -> None:
    watch_sandboxes(lambda: tools.made_sandboxes)
    serve_metrics(settings)


@signals.worker_ready.connect
def _start_reaper(**_: object) -> None:
    placement = _shared_store().placement
    placement.start_beating()

    def reap() -> None:
        while not stop.wait(_REAP_EVERY_S):
            placement.ended(tools.reap_idle())

    threading.Thread(target=reap, name="sandbox-reaper", daemon=True).start()


@signals.worker_shutdown.connect
def _close_sandboxes(**_: object) -> None:
    stop.set()
    if _store is not None:
        _store.placement.leave()
    tools.close()


stop = threading.Event()
