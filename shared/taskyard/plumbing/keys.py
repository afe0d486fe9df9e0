"""Every Redis key, channel and Celery queue name taskyard uses, in one place."""

from __future__ import annotations

import hashlib

__all__ = [
    "AGENT_QUEUE",
    "AGENT_STEP_TASK",
    "AGENT_TOOL_PREFIX",
    "APPROVAL_DEADLINES",
    "CANCEL_CHANNEL",
    "CHILD_TASK",
    "FILES_TASK",
    "FORGOTTEN_CHANNEL",
    "LIVE_TASKS",
    "MCP_LIST_TASK",
    "MCP_QUEUE",
    "PROXY_LOAD",
    "PROXY_PLACEMENTS",
    "SCHEDULES_DUE",
    "SCHEDULE_TASK",
    "SESSION_FORK_TASK",
    "SWEEP_LOCK",
    "SWEEP_TASK",
    "TOOL_RUN_TASK",
    "TOOL_WORKERS",
    "WEBHOOKS_DUE",
    "WEBHOOK_QUEUE",
    "WEBHOOK_TASK",
    "browser_page",
    "browser_results",
    "celery_taken",
    "files_download",
    "files_reply",
    "files_staged",
    "files_upload",
    "gateway_wake",
    "idempotency",
    "mcp_call",
    "mcp_listing",
    "mcp_listing_reply",
    "proxy_ratelimit",
    "schedule",
    "schedule_runs",
    "session_cells",
    "session_compaction",
    "session_epoch",
    "session_fork_reply",
    "session_key",
    "session_lock",
    "session_memory",
    "session_memory_path",
    "session_origin",
    "session_paths",
    "session_replay",
    "session_sandbox",
    "session_tasks",
    "session_values",
    "session_waiting",
    "task",
    "task_approvals",
    "task_artifact_bytes",
    "task_artifacts",
    "task_children",
    "task_events",
    "task_tool_results",
    "task_webhook_cursor",
    "task_webhook_deliveries",
    "task_webhook_lock",
    "tenant_schedules",
    "tenant_sessions",
    "tenant_tasks",
    "tool_call_claim",
    "tool_queue",
    "tool_worker_alive",
    "tool_worker_place",
    "tool_worker_queue",
    "webhook_secret",
]

AGENT_QUEUE = "agent"
AGENT_STEP_TASK = "agent.step"
CHILD_TASK = "agent.child"  # starts the child task of an agent tool call
WEBHOOK_QUEUE = "webhooks"
WEBHOOK_TASK = "webhooks.deliver"
# Tasks with webhook events not delivered yet, by when to look at them again (a retry's time,
# or a grace period after a state change): the sweep sends a delivery job for those due.
WEBHOOKS_DUE = "webhooks:due"
AGENT_TOOL_PREFIX = "agent:"  # a tool name that names a registered agent
TOOL_RUN_TASK = "tools.run"
FILES_TASK = "tools.files"  # a session's files: on the interpreter's queue, beside its cells
# Fork a session's interpreter: only ever on the queue of the tool worker holding it.
SESSION_FORK_TASK = "tools.fork_session"
TOOL_QUEUE_PREFIX = "tools."
# Calls of remote MCP servers (stateless: any tool worker consuming the queue); a local (stdio)
# server's run in the session's sandbox, so on the interpreter's queue.
MCP_QUEUE = "tools.mcp"
MCP_LIST_TASK = "tools.mcp_list"  # list an MCP server's tools for an agent worker
# Pub/sub: the id of every cancelled task, so workers stop what they run for it at once.
CANCEL_CHANNEL = "taskyard:cancelled"
# Pub/sub: a forgotten session's "tenant:session_id", so its interpreter stops.
FORGOTTEN_CHANNEL = "taskyard:sessions:forgotten"
SWEEP_TASK = "taskyard.sweep"
# Celery beat's other periodic job: submit the tasks of the cron schedules that are due.
SCHEDULE_TASK = "taskyard.schedules"
# Every tenant's schedule ids by their next run's time (what beat's job looks at).
SCHEDULES_DUE = "schedules:due"
# Live task ids by when the sweep is to look at each: once it stood still for its stall_s, or
# at its deadline if that comes first.
LIVE_TASKS = "tasks:live"
# Pending approvals with a timeout, "task_id|step|call_id" by when they are denied.
APPROVAL_DEADLINES = "approvals:deadlines"
SWEEP_LOCK = "tasks:sweep"  # one sweep at a time
TASK_PREFIX = "task:"
# The LLM proxies' shared routing state: a stream of the placements each instance made (one
# entry per sync, trimmed to the live window), and a hash of each instance's per-replica load.
PROXY_PLACEMENTS = "llm_proxy:placements"
PROXY_LOAD = "llm_proxy:load"


def tool_queue(tool_name: str) -> str:
    """Each tool has its own queue, so each tool pool scales on its own."""
    return f"{TOOL_QUEUE_PREFIX}{tool_name}"


def celery_taken(unacked_key: str = "unacked") -> str:
    """The Celery jobs workers took and have not acked yet, one sorted-set member each
    (`taskyard.plumbing.broker.QoS`). Named after kombu's ``unacked_key`` option (its default
    here), so moving one moves both, yet not kombu's hash: a worker on kombu's own ack
    emulation never reads these records."""
    return f"{unacked_key}:taken"


def task(task_id: str) -> str:
    """The task's hash: its record (`TaskRecord`'s fields) and fields only the store's scripts
    read, which the record leaves out (`before:*`: what its session held as it began, for a
    rollback)."""
    return f"{TASK_PREFIX}{task_id}"


def task_events(task_id: str) -> str:
    return f"task:{task_id}:events"


def task_tool_results(task_id: str, step: int | str) -> str:
    return f"task:{task_id}:step:{step}:results"


def tool_call_claim(task_id: str, step: int, call_id: str) -> str:
    """Held by the tool worker running the call, so a duplicate of its job does not run it
    again meanwhile (a sweep's re-send, a job restored past its visibility timeout)."""
    return f"task:{task_id}:step:{step}:call:{call_id}:claim"


# The node names of the tool workers that have their own queue (the sweep re-drives the queue
# of one that is gone).
TOOL_WORKERS = "tool_workers"


def tool_worker_alive(node: str) -> str:
    """Kept alive by the tool worker `node` (its heartbeat): its incarnation, while it runs."""
    return f"tool_worker:{node}:alive"


def tool_worker_place(node: str) -> str:
    """Where the tool worker `node`'s sandboxes run (its Docker engine), kept as long as its
    heartbeat: the workers that one stopping on purpose may hand its sandboxes to."""
    return f"tool_worker:{node}:place"


def tool_worker_queue(node: str) -> str:
    """A tool worker's own queue, named after its Celery node name: the jobs of the sessions
    whose interpreters it holds."""
    return f"worker.{node}"


def task_children(task_id: str) -> str:
    """The ids of the child tasks a task's agent tool calls started."""
    return f"task:{task_id}:children"


def task_webhook_cursor(task_id: str) -> str:
    """The last event of the task its webhook jobs are done with (delivered or given up)."""
    return f"task:{task_id}:webhook:cursor"


def task_webhook_deliveries(task_id: str) -> str:
    """Each webhook delivery of the task by event id: its state, attempts, last answer."""
    return f"task:{task_id}:webhook:deliveries"


def task_webhook_lock(task_id: str) -> str:
    """Held by the one job delivering the task's webhook events (they go out in order)."""
    return f"task:{task_id}:webhook:lock"


def task_approvals(task_id: str, step: int) -> str:
    """The step's calls that wait for (or had) a person's decision: call id to its state."""
    return f"task:{task_id}:step:{step}:approvals"


def task_artifacts(task_id: str) -> str:
    """The task's artifacts (the Redis artifact store): name to bytes."""
    return f"task:{task_id}:artifacts"


def task_artifact_bytes(task_id: str) -> str:
    """How many bytes the task's artifacts take in the Redis artifact store (its budget)."""
    return f"task:{task_id}:artifacts:bytes"


def idempotency(tenant: str, key: str) -> str:
    return f"idempotency:{tenant}:{key}"


def session_memory(tenant: str, session_id: str, path: str = "memory") -> str:
    """One memory of the session's agent tree: ``memory`` is the top agent's, sub-agents'
    memories go by their `state_dict` key (``writer.memory``)."""
    base = f"session:{tenant}:{session_id}:memory"
    return base if path == "memory" else f"{base}:{path}"


def session_memory_path(tenant: str, session_id: str, key: str) -> str:
    """The `state_dict` path of a memory `key` (one `session_memory` made)."""
    top = session_memory(tenant, session_id)
    return "memory" if key == top else key.removeprefix(f"{top}:")


def session_key(tenant: str, session_id: str) -> str:
    """A session's name in its tool state's keys (`session_sandbox`, `browser_results`), in the
    sandbox provider and on `FORGOTTEN_CHANNEL`."""
    return f"{tenant}:{session_id}"


def session_values(tenant: str, session_id: str) -> str:
    """The session's `SessionValues` (agent state that is not messages): `state_dict` key to
    its JSON."""
    return f"session:{tenant}:{session_id}:values"


def tenant_tasks(tenant: str) -> str:
    """A tenant's task ids by creation time (the task list, newest first)."""
    return f"tenant:{tenant}:tasks"


def tenant_sessions(tenant: str) -> str:
    """A tenant's session ids by their latest task's creation time (the session list, most
    recently used first); a deleted session leaves it until its next task."""
    return f"tenant:{tenant}:sessions"


def session_tasks(tenant: str, session_id: str) -> str:
    """A session's task ids by creation time."""
    return f"session:{tenant}:{session_id}:tasks"


def session_paths(tenant: str, session_id: str) -> str:
    """The memory paths a session's agents have written (so forgetting it finds them all)."""
    return f"session:{tenant}:{session_id}:paths"


def session_cells(session_key: str) -> str:
    """The cells that ran without an error in the session's current interpreter, in order
    (`shared/taskyard/agentkit/actions/cells.py`)."""
    return f"session:{session_key}:cells"


def session_replay(session_key: str) -> str:
    """The cells of the session's interpreter before its state was last lost: what
    ``%replay`` runs again."""
    return f"session:{session_key}:replay"


def session_sandbox(session_key: str) -> str:
    """Which tool worker holds the session's interpreter (node, incarnation, its queue), whether
    it lives (`state`: live; handed to the worker named, or parked for any worker where it
    runs, by one that stopped on purpose; or lost, and why), its last use, and the handle of
    a handed-over interpreter (`sandbox`)."""
    return f"session:{session_key}:sandbox"


def sandbox_host(host: str) -> str:
    """Which tool worker holds a container of several sessions handed over by a worker that
    stopped (`host`: their handles' common part, before '#'): node, incarnation, queue. Its
    other sessions' calls go there, so that one worker attaches to it."""
    return f"sandbox_host:{host}"


def session_compaction(tenant: str, session_id: str) -> str:
    """What the model sees of the session's memory: the summary that replaced its first
    `upto` messages (the messages themselves stay)."""
    return f"session:{tenant}:{session_id}:compaction"


def session_epoch(tenant: str, session_id: str) -> str:
    """Bumped whenever a session's memory is rewritten, so cached copies know they are stale."""
    return f"session:{tenant}:{session_id}:epoch"


def session_origin(tenant: str, session_id: str) -> str:
    """The id of the session this one was forked from (`POST /v1/sessions/{id}/fork`)."""
    return f"session:{tenant}:{session_id}:forked_from"


def session_fork_reply(request_id: str) -> str:
    """The list a fork request's answer is pushed onto (the gateway pops it)."""
    return f"fork:{request_id}:reply"


def session_lock(tenant: str, session_id: str) -> str:
    """The id of the task that holds the session (one task at a time per session)."""
    return f"session:{tenant}:{session_id}:task"


def session_waiting(tenant: str, session_id: str) -> str:
    """Ids of the session's tasks waiting their turn, oldest first."""
    return f"session:{tenant}:{session_id}:task:waiting"


def gateway_wake(process_id: str) -> str:
    """A gateway process's own stream, written to wake its event hub's blocked XREAD."""
    return f"gateway:{process_id}:wake"


def browser_results(session_key: str) -> str:
    """The WebBrowser tool's latest search results for a "tenant:session_id" session key."""
    return f"session:{session_key}:browser"


def browser_page(session_key: str, url: str) -> str:
    """A page the WebBrowser tool opened for a session, keyed by a hash of its URL."""
    return f"session:{session_key}:browser:page:{hashlib.sha256(url.encode()).hexdigest()}"


def proxy_ratelimit(tenant: str, window: int) -> str:
    """The LLM proxies' shared spending of one tenant in one rate window (fields req, tok)."""
    return f"llm_proxy:ratelimit:{tenant}:{window}"


def schedule(schedule_id: str) -> str:
    """A cron schedule: its tenant, cron, missed-run policy, task, next run and counters."""
    return f"schedule:{schedule_id}"


def schedule_runs(schedule_id: str) -> str:
    """A schedule's latest runs (JSON: when, the task it made or why none), newest first."""
    return f"schedule:{schedule_id}:runs"


def tenant_schedules(tenant: str) -> str:
    """A tenant's schedule ids by creation time."""
    return f"tenant:{tenant}:schedules"


def webhook_secret(tenant: str) -> str:
    """The tenant's webhook signing secret ("whsec_" + base64)."""
    return f"tenant:{tenant}:webhook_secret"


def mcp_listing(tenant: str, server_id: str, session_id: str | None = None) -> str:
    """An MCP server's tool listing as the tenant reaches it (`server_id`: a hash of how it is
    reached), kept a while so steps do not list it again; a local server's per session (a
    session id may hold ':', a server id never does)."""
    if session_id is not None:
        return f"mcp:{tenant}:{session_id}:{server_id}:tools"
    return f"mcp:{tenant}:{server_id}:tools"


def mcp_listing_reply(request_id: str) -> str:
    """The list a listing request's answer is pushed onto (the agent worker pops it)."""
    return f"mcp:{request_id}:reply"


def mcp_call(tenant: str, client: str, request_id: str) -> str:
    """The task of a call to the gateway's /mcp in flight, found by what the client's
    cancellation names: its client (the MCP session id it was given) and the call's request id
    (both sent by the client, so hashed: bounded, and no ":" of theirs splits the key)."""
    digest = hashlib.sha256(f"{client}\n{request_id}".encode()).hexdigest()
    return f"mcp_call:{tenant}:{digest}"


def files_upload(request_id: str) -> str:
    """An upload's bytes, staged for the tool worker that writes them into the sandbox."""
    return f"files:{request_id}:upload"


def files_staged(tenant: str, session_id: str) -> str:
    """Bytes of the session's uploads staged and not yet taken (its quota in Redis)."""
    return f"session:{tenant}:{session_id}:files:staged"


def files_reply(request_id: str) -> str:
    """The list a files request's answer is pushed onto (the gateway pops it)."""
    return f"files:{request_id}:reply"


def files_download(request_id: str) -> str:
    """A file read's bytes, set just before its answer."""
    return f"files:{request_id}:download"


# A task's id (what `taskyard.runtime.task.new_task_id` makes, and nothing else), and how long
# a finished task's keys are kept.
TASK_ID_PATTERN = r"^task_[0-9a-f]{32}$"
RETENTION_S = 7 * 24 * 3600
