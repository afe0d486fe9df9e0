"""One tool worker's jobs, with their dependencies handed in (so tests run them without Celery).

A tool call: a job of a session held by another live worker goes there; else the call is
claimed (not run while a duplicate of its job runs it, nor again once its result is in), run
with the task's cancel interrupting it, its artifacts kept, and its result stored in one round
trip with the next step's job when it completes the step. A request for a session's files and
a listing of an MCP server are served where the session's interpreter lives, and not at all
once the asker stopped waiting.

The Celery module (`worker.py`) only wires: it opens one runner per process and hands it each
job.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from functools import partial

from celery import Celery
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from services.tool_worker.artifacts import ArtifactKeeper
from services.tool_worker.cells import HeldCells, RedisCellLog
from services.tool_worker.errors import CallFailed
from services.tool_worker.files import FileLimits, serve
from services.tool_worker.forks import fork
from services.tool_worker.metrics import TOOL_CALL_SECONDS
from services.tool_worker.placement import Placement
from services.tool_worker.thread_stores import ThreadStores
from services.tool_worker.toolbox import Toolbox
from taskyard.agentkit.actions.mcp.listing import ListingExchange
from taskyard.agentkit.schema import ActionReturn, ActionStatusCode, AgentMessage, ToolCall
from taskyard.agentkit.text import replace_lone_surrogates
from taskyard.files.artifacts import ArtifactStore, ArtifactStoreUnavailable, make_artifact_store
from taskyard.files.transfer import FileTransfer
from taskyard.plumbing.logs import bind_job
from taskyard.plumbing.loop import LoopThread
from taskyard.plumbing.redis_clients import async_client
from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.runtime.cancel import CancelWatch, Heard
from taskyard.runtime.forks import ForkExchange
from taskyard.runtime.jobs import (
    AgentStepJob,
    Envelope,
    McpListJob,
    SessionFilesJob,
    SessionForkJob,
    ToolRunJob,
    envelope,
    sticky_session,
)
from taskyard.runtime.store import InterpreterUse, TaskStore, ToolResultStored
from taskyard.runtime.store.sandboxes import SandboxDirectory, SessionClaim, ToolWorkerId
from taskyard.runtime.store.tool_calls import CallClaimed, call_claim

__all__ = ["ToolCallRunner", "record_ttl_s"]

# The jobs that go to the live worker holding their session's interpreter.
HeldJob = ToolRunJob | SessionFilesJob | McpListJob | SessionForkJob

log = logging.getLogger("taskyard.tool_worker")


def record_ttl_s(settings: ToolWorkerSettings) -> float:
    """How long a session's sandbox record outlives its interpreter's last use: a session
    coming back within a day of its interpreter's expiry is told why its state is gone."""
    return settings.sandbox_idle_s + 86400


class ToolCallRunner:
    """A tool worker's jobs, as `me`: a tool call's claim and result on the pool thread's own
    loop and store client (`stores`), the rest on the worker's store loop (one for the pool's
    threads)."""

    def __init__(
        self,
        settings: ToolWorkerSettings,
        me: ToolWorkerId,
        celery: Celery,
        *,
        tools: Toolbox,
        loop: LoopThread,
        store: TaskStore,
        transfer: FileTransfer,
        artifacts: ArtifactKeeper,
        cancels: CancelWatch,
        placement: Placement,
        cells: RedisCellLog,
        stores: ThreadStores,
    ) -> None:
        self.settings = settings
        self.me = me
        self.celery = celery  # builds the envelopes of the jobs a result or a forward pushes
        self.tools = tools
        self.loop = loop
        self.store = store
        self.transfer = transfer
        self.artifacts = artifacts
        self.cancels = cancels  # hears a task's cancel
        self.placement = placement
        self.cells = cells  # the sessions' interpreter cells, recorded with the results
        self.stores = stores
        self.listings = ListingExchange(store.r, settings.mcp_tools_ttl_s)
        self.forks = ForkExchange(store.r)
        self._stopped = threading.Event()

    @classmethod
    def open(cls, settings: ToolWorkerSettings, me: ToolWorkerId, celery: Celery) -> ToolCallRunner:
        """A worker process's runner: its clients made on a loop thread of their own, its
        toolbox keeping the sessions' cells in Redis, its cancel watch listening."""
        loop = LoopThread("tool-store")
        store, transfer, artifact_store = loop.run(_connect(settings))
        tools = Toolbox(settings, me.node)
        cells = RedisCellLog(store.r, loop, record_ttl_s(settings))
        tools.keep_cells(cells)
        cancels = CancelWatch(store.r, on_forgotten=tools.release)
        loop.run(_listen(cancels))
        directory = SandboxDirectory(store, record_ttl_s(settings))
        beat_s, dead_s = settings.tool_worker_beat_s, settings.tool_worker_dead_s
        placement = Placement(directory, loop, me, tools, beat_s, dead_s, settings.sandbox_idle_s)
        artifacts = ArtifactKeeper(artifact_store, store.publish)
        stores = ThreadStores(settings, tools, record_ttl_s(settings))
        return cls(settings, me, celery, tools=tools, loop=loop, store=store, transfer=transfer,
                   artifacts=artifacts, cancels=cancels, placement=placement, cells=cells,
                   stores=stores)  # fmt: skip

    # -- a tool call ----------------------------------------------------------------------

    def run_call(self, job: ToolRunJob, may_retry: bool = False) -> None:
        """Run one tool call of a task's step; the result that completes the step pushes the
        next step's job with it. Raises `CallFailed` when the worker could not run the call
        and `may_retry`; without, the model reads why.

        A cancel of the task stops it: one from before its claim, the claim sees (the call is
        not run); one from then on is heard, and stops the session's cell, as soon as it has
        started if it had not (its result is then refused)."""
        stop = partial(self.tools.interrupt, job.session_key)
        with self.cancels.watch_until_stopped(job.task_id, stop) as heard:
            self._claim_and_run(job, may_retry, heard)

    def _claim_and_run(self, job: ToolRunJob, may_retry: bool, heard: Heard) -> None:
        session_key = job.session_key if sticky_session(job) else None
        call = call_claim(job.task_id, job.step, job.call.id, self.me.node, self.me.incarnation,
                          self._claim_ttl_s())  # fmt: skip
        session, claimed = self.stores.run(
            lambda here: self.placement.ask(session_key, call, here.directory)
        )  # one trip, from this thread
        if session is not None:
            self.placement.settle(job.session_key, session)
        if claimed is None:  # the session's live holder runs it
            assert session is not None
            self._forward(job, session)
            return
        if claimed == "ended" or heard.cancelled:
            log.info("the task ended before its tool call ran: not run")
            if claimed == "claimed":
                self._release(job)
            return
        next_step = envelope(self.celery, AgentStepJob.after_tools(job))
        if claimed == "busy":  # a duplicate of this job runs it now, and will store its result
            log.info("tool call already running elsewhere; not run again")
            return
        if claimed == "done":  # only look whether the step's results are complete
            self.store_result(job, None, next_step)
            return
        try:
            with self.cells.held(job.session_key) as cells:
                message = self.keep_artifacts(job, self._timed_call(job, may_retry))
                used = self._use_of(job, cells)
                self.store_result(job, message, next_step, used)
                if used is not None and used.cells is not None:
                    cells.codes.clear()  # recorded with the result
        except BaseException:
            self._release(job)  # its retry (or a re-send) may run it
            raise

    def forwarded(self, job: HeldJob) -> bool:
        """Whether the job belongs to the live worker holding its session, and went there."""
        claim = self.placement.claim(job.session_key)
        if claim.verdict != "forward":
            return False
        self._forward(job, claim)
        return True

    def _forward(self, job: HeldJob, claim: SessionClaim) -> None:
        log.info("session held by another tool worker; job forwarded to %s", claim.detail)
        self.placement.forward(envelope(self.celery, job))

    def claim(self, job: ToolRunJob) -> CallClaimed:
        """Whether this job runs the call (see `CallClaimed`): a duplicate running it would
        run it twice in the session's interpreter. A claim outlives the longest call, and
        holds nothing back once its worker's heartbeat lapses or the worker starts again."""
        claim = self.store.claim_call(job.task_id, job.step, job.call.id, self.me.node,
                                      self.me.incarnation, self._claim_ttl_s())  # fmt: skip
        return self.loop.run(claim)

    def _claim_ttl_s(self) -> float:
        return self.settings.stall_s + self.settings.sandbox_timeout_s

    def _use_of(self, job: ToolRunJob, cells: HeldCells) -> InterpreterUse | None:
        if not self.tools.has_sandbox(job.session_key):
            return None
        held = self.cells.document(cells)
        return InterpreterUse(job.session_key, record_ttl_s(self.settings), held)

    def _release(self, job: ToolRunJob) -> None:
        release = self.store.release_call(job.task_id, job.step, job.call.id)
        try:
            self.loop.run(release)
        except (RedisConnectionError, RedisTimeoutError):  # it lapses on its own
            log.warning("could not release a tool-call claim")

    def _timed_call(self, job: ToolRunJob, may_retry: bool) -> AgentMessage:
        started, outcome = time.perf_counter(), "crashed"
        try:
            message = self._run_call(job, may_retry)
            failed = isinstance(message.content, ActionReturn) and message.content.errmsg
            outcome = "error" if failed else "ok"
            return message
        finally:
            elapsed = time.perf_counter() - started
            TOOL_CALL_SECONDS.labels(job.call.name, outcome).observe(elapsed)

    def _run_call(self, job: ToolRunJob, may_retry: bool) -> AgentMessage:
        log.info("tool call %s", job.call.name)
        try:
            return self.tools.run_job(job)
        except Exception as exc:  # the worker's own trouble: retry, then tell the model
            if may_retry:
                log.warning("tool call failed, retrying: %s", exc)
                raise CallFailed(exc) from exc
            log.exception("tool call failed for good")
            return worker_error(job.call, exc, "the tool could not run")

    def keep_artifacts(self, job: ToolRunJob, message: AgentMessage) -> AgentMessage:
        """The result with its artifacts in the artifact store; if that fails, without them
        (their bytes never go into the task's messages) and the model is told."""
        if not isinstance(message.content, ActionReturn) or not message.content.artifacts:
            return message  # nothing to keep: no trip to the store's loop
        try:
            return self.loop.run(self.artifacts.keep(job, message))
        except Exception as exc:
            log.exception("artifacts could not be kept")
            note = f"[its figures and tables could not be kept ({type(exc).__name__})]"
            ret = message.content.model_copy(update={"artifacts": None})
            ret.result = [*(ret.result or []), {"type": "text", "content": note}]
            return message.model_copy(update={"content": ret})

    def store_result(
        self,
        job: ToolRunJob,
        message: AgentMessage | None,
        next_step: Envelope,
        used: InterpreterUse | None = None,
    ) -> ToolResultStored:
        """Store the call's result (None: only check the step's results), with the next
        step's job if it completes the step. A result that cannot be stored (a value no JSON
        encoder takes) is replaced by an error the model reads, so the step never waits on it
        for good."""

        def put(result: AgentMessage | None) -> ToolResultStored:
            return self.stores.run(
                lambda here: here.store.put_tool_result(
                    job.task_id, job.step, job.call.id, result, next_step, used
                )
            )

        try:
            return put(message)
        except Exception as exc:
            if message is None:
                raise  # nothing of the tool's failed here: Redis did
            log.exception("tool result could not be stored; the model is told")
            return put(worker_error(job.call, exc, "its result could not be stored"))

    # -- a session's files, an MCP server's listing ---------------------------------------

    def serve_files(self, job: SessionFilesJob) -> None:
        """Serve the gateway's request for a session's files (nothing once it stopped
        waiting)."""
        if self.forwarded(job):
            return
        upload = None
        if job.op == "write":
            take = self.transfer.take_upload(job.request_id, job.tenant, job.session_id)
            upload = self.loop.run(take)
        if job.expired:
            log.info("files request %s expired unserved", job.request_id)
            return
        limits = FileLimits.from_settings(self.settings)
        reply, data = serve(job, self.tools.sandboxes(), upload, limits)
        self.loop.run(self.transfer.answer(job.request_id, reply, data))

    def list_mcp(self, job: McpListJob) -> None:
        """List an MCP server's tools for the agent worker waiting on the answer (a local
        server in the session's sandbox, so on the worker holding it)."""
        if sticky_session(job) and self.forwarded(job):
            return
        if job.expired:
            log.info("MCP listing %s expired unserved", job.request_id)
            return
        with bind_job(tenant=job.tenant, session_id=job.session_id, tool=job.server.name):
            listing = self.tools.mcp().list(job)
        if listing.error is not None:
            log.warning("MCP server not listed: %s", listing.error)
        answer = self.listings.answer(
            job.request_id, job.tenant, job.session_id, job.server, listing
        )
        self.loop.run(answer)

    # -- a session's fork -----------------------------------------------------------------

    def fork_session(self, job: SessionForkJob) -> None:
        """Copy the source session's interpreter for its fork and place the new session here,
        beside it; answer the gateway waiting (nothing once it stopped waiting)."""
        if self.forwarded(job):
            return
        if job.expired:
            log.info("fork request %s expired unserved", job.request_id)
            return
        with bind_job(tenant=job.tenant, session_id=job.session_id):
            reply = fork(job, self.tools.sandboxes())
            if reply.outcome == "copied":
                self._place_fork(job)
            else:
                log.info("session fork: interpreter %s %s", reply.outcome, reply.detail)
        self.loop.run(self.forks.answer(job.request_id, reply))

    def _place_fork(self, job: SessionForkJob) -> None:
        try:
            self.placement.place_fork(job.session_key, job.new_session_key)
        except BaseException:  # unplaced, it would run unseen: the gateway undoes the fork
            self.tools.release(job.new_session_key)
            raise

    # -- the worker's life ----------------------------------------------------------------

    def start(self) -> None:
        """Make the sandboxes, removing what an earlier run of this worker left (its
        tool-call claims name that run: they hold nothing back). Raises `SandboxError` (or
        `ValueError`) saying why the configured backend cannot run here."""
        removed = self.tools.start(self.me.node)
        backend = self.settings.sandbox_backend
        log.info("sandboxes (%s) ready; removed %d left by an earlier run", backend, removed)

    def say_artifact_expiry(self) -> None:
        """Say how artifacts expire; loudly where nothing will (an S3 bucket without the
        lifecycle rule) or the store does not answer."""
        try:
            expiry = self.loop.run(self.artifacts.store.expiry())
        except ArtifactStoreUnavailable as exc:
            log.warning("the artifact store does not answer: %s", exc)
            return
        if expiry.after_s is None:
            log.warning("artifacts never expire: %s (see docs/deployment.md)", expiry.how)
        else:
            log.info("artifacts (%s backend): %s", self.settings.artifacts_backend, expiry.how)

    def start_reaper(self) -> None:
        """Beat, and stop the interpreters idle too long, until `stop`."""
        self.placement.start_beating()
        threading.Thread(target=self._reap, name="sandbox-reaper", daemon=True).start()

    def _reap(self) -> None:
        every_s = min(60.0, self.settings.sandbox_idle_s / 2)
        while not self._stopped.wait(every_s):
            self.placement.ended(self.tools.reap_idle())

    def stop(self) -> None:
        """The worker's shutdown: the reaper stops, the interpreters are handed over (or
        marked lost) and the sandboxes closed."""
        self._stopped.set()
        self.placement.leave()
        self.tools.close()


def worker_error(call: ToolCall, exc: Exception, what: str) -> AgentMessage:
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


async def _connect(settings: ToolWorkerSettings) -> tuple[TaskStore, FileTransfer, ArtifactStore]:
    """The worker's clients, made on the loop that uses them."""
    store = TaskStore.from_settings(settings, "taskyard-tool-worker")
    files = async_client(
        settings.redis_url, settings.sentinel, client_name="taskyard-tool-worker-files"
    )
    # The artifact store is on this worker's store (the Redis backend's home).
    return store, FileTransfer(files, settings.files_timeout_s), make_artifact_store(settings)


async def _listen(cancels: CancelWatch) -> None:
    asyncio.get_running_loop().create_task(cancels.listen())
    await asyncio.wait_for(cancels.ready.wait(), 10)
