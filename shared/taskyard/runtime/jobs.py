"""Every Celery job taskyard sends: its payload (one pydantic model), the function that
enqueues it, and its `Envelope`.

An envelope is the job as the broker holds it: Celery's task message (built by Celery itself,
protocol 2) inside kombu's Redis transport wrapping, ready to be pushed onto its queue's list.
The store pushes envelopes from inside its Lua scripts, so a step's commit and the jobs it
starts are one atomic write: no crash can land between them, and no job is sent twice. (The
broker therefore lives on the store's Redis server; another database number is fine.)

No Celery signal fires for an envelope, so Celery's tracing instrumentation cannot add the
trace context to it: `envelope` puts the current one (`traceparent`) into the message's
headers itself, where the instrumentation on the consuming side looks for it.
"""

from __future__ import annotations

import base64
import time
import uuid
from dataclasses import dataclass
from typing import Any, Literal

import orjson
from celery import Celery
from opentelemetry.propagate import inject
from pydantic import BaseModel, ConfigDict, Field

from taskyard.agentkit.actions import action_queue, session_bound
from taskyard.agentkit.schema import ToolCall
from taskyard.agentkit.spec import AgentSpec, McpServer
from taskyard.plumbing import keys
from taskyard.plumbing.ids import unique_uuid
from taskyard.runtime.task import TaskRecord

__all__ = [
    "AgentStepJob",
    "ChildJob",
    "Envelope",
    "Job",
    "McpListJob",
    "SessionFilesJob",
    "SessionForkJob",
    "ToolRunJob",
    "WebhookJob",
    "enqueue",
    "enqueue_agent_step",
    "enqueue_tool_run",
    "envelope",
    "job_for_call",
    "sticky_session",
]


class _Job(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def payload(self) -> dict[str, Any]:
        """The JSON the job travels as (Celery's JSON serializer)."""
        return self.model_dump(mode="json")


class AgentStepJob(_Job):
    """Run step `step` of a task (a stale or duplicate step does nothing). The task's tenant
    and session come along, so the step reads the session's memory in its first round trip."""

    task_id: str
    step: int = Field(ge=0)
    tenant: str
    session_id: str

    # One constructor per reason a step is sent (each site said it by hand before).
    @classmethod
    def first(cls, record: TaskRecord) -> AgentStepJob:
        """A new task's first step."""
        return cls.next_in_session(record, record.id)

    @classmethod
    def next_in_session(cls, record: TaskRecord, task_id: str) -> AgentStepJob:
        """The first step of `task_id`, the task that takes `record`'s session next."""
        return cls(task_id=task_id, step=0, tenant=record.tenant, session_id=record.session_id)

    @classmethod
    def again(cls, record: TaskRecord) -> AgentStepJob:
        """The step the task is at, sent (again): its calls' results are in, a person
        decided, a sweep found it standing still."""
        return cls(task_id=record.id, step=record.step, tenant=record.tenant,
                   session_id=record.session_id)  # fmt: skip

    @classmethod
    def after_tools(cls, job: ToolRunJob) -> AgentStepJob:
        """The step that reads the results of the tool calls of `job`'s step."""
        return cls(task_id=job.task_id, step=job.step + 1, tenant=job.tenant,
                   session_id=job.session_id)  # fmt: skip


class ToolRunJob(_Job):
    """Run one tool call of a task's step in the session's tool state. A call of an MCP
    server's tool carries the server as the task's spec names it (`mcp`): the tool worker
    reaches it from that alone (the tenant's credential it adds itself)."""

    task_id: str
    step: int = Field(ge=0)
    tenant: str
    session_id: str
    call: ToolCall
    mcp: McpServer | None = None

    @property
    def session_key(self) -> str:
        """Tool state (sandboxes, browser results) is per tenant and session."""
        return keys.session_key(self.tenant, self.session_id)


class ChildJob(_Job):
    """Start the child task an agent tool call (``agent:<name>``) of a task's step asks for."""

    task_id: str  # the parent's
    step: int = Field(ge=0)
    tenant: str
    session_id: str  # the parent's
    call: ToolCall


class WebhookJob(_Job):
    """Deliver a task's webhook events not delivered yet, in order."""

    task_id: str


def job_for_call(
    task_id: str, step: int, tenant: str, session_id: str, call: ToolCall, spec: AgentSpec
) -> Job:
    """The job a tool call of a step becomes: a child task for an agent, else a tool run (of
    an MCP server's tool when the task's `spec` names the server)."""
    if call.name.startswith(keys.AGENT_TOOL_PREFIX):
        return ChildJob(task_id=task_id, step=step, tenant=tenant, session_id=session_id,
                        call=call)  # fmt: skip
    return ToolRunJob(task_id=task_id, step=step, tenant=tenant, session_id=session_id,
                      call=call, mcp=spec.mcp_server_for(call.name))  # fmt: skip


class _WaitedFor(_Job):
    """A request a caller waits for, by `request_id`, about one session; found after
    `expires_at` (Unix time: the caller stopped waiting) it does nothing."""

    request_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    tenant: str
    session_id: str
    expires_at: float

    @property
    def session_key(self) -> str:
        return keys.session_key(self.tenant, self.session_id)

    @property
    def expired(self) -> bool:
        return time.time() > self.expires_at


class McpListJob(_WaitedFor):
    """List an MCP server's tools for an agent worker, which waits for the answer on
    `keys.mcp_listing_reply(request_id)` (`taskyard.agentkit.actions.mcp.listing`). A local server
    is listed in the session's sandbox, so the job goes where a call of it would."""

    server: McpServer


class SessionFilesJob(_WaitedFor):
    """Read or write a session's working directory for the gateway (see `taskyard.files.transfer`):
    ``write`` the upload staged under `request_id` to `path`, ``read`` the file at `path`,
    ``list`` them all. It goes on the interpreter's queue, whose workers hold the sandboxes."""

    op: Literal["write", "read", "list"]
    path: str | None = None


class SessionForkJob(_WaitedFor):
    """Give session `new_session_id` a live copy of the interpreter of `session_id` (the
    source), for the gateway waiting on `keys.session_fork_reply(request_id)`
    (`taskyard.runtime.forks`). Only the store's fork script sends it, and only to the queue
    of the live tool worker holding the source's interpreter: the copy is made there, and the
    new session is placed there too."""

    new_session_id: str

    @property
    def new_session_key(self) -> str:
        return keys.session_key(self.tenant, self.new_session_id)


Job = (
    AgentStepJob | ToolRunJob | ChildJob | WebhookJob | SessionFilesJob | McpListJob
    | SessionForkJob
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Envelope:
    """A job as the broker holds it: its queue's Redis list and kombu's message JSON, and
    for a job bound to a session's interpreter that session (`sticky`): the store's scripts
    push it to the queue of the tool worker holding the interpreter, if one does."""

    queue: str
    message: str
    sticky: str = ""

    def parts(self) -> tuple[str, str, str]:
        """As the store's scripts take a job: queue, sticky session ('' for none), message."""
        return self.queue, self.sticky, self.message


FILES_TOOL = "IPythonInterpreter"  # the tool whose workers hold the sessions' sandboxes


def sticky_session(job: Job) -> str:
    """The session whose interpreter the job needs ('' for none): a call of a tool bound to
    its session's sandbox (`BaseAction.session_bound`), a listing or call of a local MCP
    server (it runs there), or a request for the session's files. Such a job goes to the
    tool worker holding that interpreter."""
    if isinstance(job, SessionFilesJob | SessionForkJob):
        return job.session_key
    if isinstance(job, McpListJob):
        return job.session_key if job.server.local else ""
    if isinstance(job, ToolRunJob) and job.mcp is not None:
        return job.session_key if job.mcp.local else ""
    if isinstance(job, ToolRunJob) and session_bound(job.call.name):
        return job.session_key
    return ""


def _mcp_queue(server: McpServer) -> str:
    """Remote servers' jobs on the MCP pool; a local one's with the session's interpreter."""
    return action_queue(FILES_TOOL) if server.local else keys.MCP_QUEUE


def _route(job: Job) -> tuple[str, str]:
    """The Celery task name and the queue of a job."""
    if isinstance(job, ToolRunJob) and job.mcp is not None:
        return keys.TOOL_RUN_TASK, _mcp_queue(job.mcp)
    if isinstance(job, ToolRunJob):
        return keys.TOOL_RUN_TASK, action_queue(job.call.name)
    if isinstance(job, McpListJob):
        return keys.MCP_LIST_TASK, _mcp_queue(job.server)
    if isinstance(job, ChildJob):
        return keys.CHILD_TASK, keys.AGENT_QUEUE
    if isinstance(job, WebhookJob):
        return keys.WEBHOOK_TASK, keys.WEBHOOK_QUEUE
    if isinstance(job, SessionFilesJob):
        return keys.FILES_TASK, action_queue(FILES_TOOL)
    if isinstance(job, SessionForkJob):
        return keys.SESSION_FORK_TASK, action_queue(FILES_TOOL)
    return keys.AGENT_STEP_TASK, keys.AGENT_QUEUE


def _describe(job: Job) -> str:
    # What Celery's logs and Flower show for the job, instead of its whole payload.
    if isinstance(job, WebhookJob):
        return f"{job.task_id} webhook"
    if isinstance(job, SessionFilesJob):
        return f"files {job.op} {job.session_key} {job.request_id}"
    if isinstance(job, McpListJob):
        return f"mcp list {job.server.name} {job.session_key} {job.request_id}"
    if isinstance(job, SessionForkJob):
        return f"fork {job.session_key} to {job.new_session_id} {job.request_id}"
    call = f" {job.call.name}#{job.call.id}" if not isinstance(job, AgentStepJob) else ""
    return f"{job.task_id} step {job.step}{call}"


def enqueue(celery: Celery, job: Job) -> None:
    """Send one job through Celery (where no store write goes with it)."""
    name, queue = _route(job)
    # Results travel through the store: without ignore_result, send_task would subscribe to
    # the result backend for every job (a Redis round trip, and an unsubscribe later).
    celery.send_task(name, args=[job.payload()], queue=queue, ignore_result=True,
                     argsrepr=_describe(job), kwargsrepr="{}")  # fmt: skip


def enqueue_agent_step(celery: Celery, job: AgentStepJob) -> None:
    enqueue(celery, job)


def enqueue_tool_run(celery: Celery, job: ToolRunJob) -> None:
    enqueue(celery, job)


def envelope(celery: Celery, job: Job) -> Envelope:
    """The job as `enqueue` would put it on the broker, for the store to push atomically.

    Celery builds the task message; the wrapping is kombu's Redis transport format (the
    virtual transport's `prepare_message`, then base64 body and delivery tag, as its
    `basic_publish` does for the default exchange). A test holds it equal to kombu's own.
    """
    name, queue = _route(job)
    task_id = unique_uuid()
    message = celery.amqp.as_task_v2(
        task_id, name, args=(job.payload(),), kwargs={}, ignore_result=True,
        argsrepr=_describe(job), kwargsrepr="{}",
    )  # fmt: skip
    inject(message.headers)  # the trace goes on with the job (nothing is added when it is off)
    properties = {
        **message.properties,
        "delivery_mode": 2,
        "delivery_info": {"exchange": "", "routing_key": queue},
        "priority": 0,
        "body_encoding": "base64",
        "delivery_tag": unique_uuid(),
    }
    wrapped = {
        "body": base64.b64encode(orjson.dumps(message.body)).decode(),
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": message.headers,
        "properties": properties,
    }
    return Envelope(queue, orjson.dumps(wrapped).decode(), sticky_session(job))
