"""Every Redis key, channel and Celery queue name taskyard uses, in one place."""

from __future__ import annotations

import hashlib

__all__ = [
    "AGENT_QUEUE",
    "AGENT_STEP_TASK",
    "CANCEL_CHANNEL",
    "FILES_TASK",
    "LIVE_TASKS",
    "SWEEP_LOCK",
    "SWEEP_TASK",
    "TASK_DEADLINES",
    "TOOL_RUN_TASK",
    "browser_page",
    "browser_results",
    "files_download",
    "files_reply",
    "files_staged",
    "files_upload",
    "gateway_wake",
    "idempotency",
    "session_epoch",
    "session_lock",
    "session_memory",
    "session_waiting",
    "task",
    "task_advanced",
    "task_events",
    "task_tool_results",
    "tool_queue",
]

AGENT_QUEUE = "agent"
AGENT_STEP_TASK = "agent.step"
TOOL_RUN_TASK = "tools.run"
FILES_TASK = "tools.files"  # a session's files: on the interpreter's queue, beside its cells
TOOL_QUEUE_PREFIX = "tools."
# Pub/sub: the id of every cancelled task, so workers stop what they run for it at once.
CANCEL_CHANNEL = "taskyard:cancelled"
SWEEP_TASK = "taskyard.sweep"
# Sorted sets of live task ids: by the time each last moved, and by its deadline.
LIVE_TASKS = "tasks:live"
TASK_DEADLINES = "tasks:deadlines"
SWEEP_LOCK = "tasks:sweep"  # one sweep at a time
TASK_PREFIX = "task:"


def tool_queue(tool_name: str) -> str:
    """Each tool has its own queue, so each tool pool scales on its own."""
    return f"{TOOL_QUEUE_PREFIX}{tool_name}"


def task(task_id: str) -> str:
    return f"{TASK_PREFIX}{task_id}"


def task_events(task_id: str) -> str:
    return f"task:{task_id}:events"


def task_tool_results(task_id: str, step: int) -> str:
    return f"task:{task_id}:step:{step}:results"


def task_advanced(task_id: str, step: int) -> str:
    """Set by the one tool result that completes a step (and so starts the next one)."""
    return f"task:{task_id}:step:{step}:advanced"


def idempotency(tenant: str, key: str) -> str:
    return f"idempotency:{tenant}:{key}"


def session_memory(tenant: str, session_id: str, path: str = "memory") -> str:
    """One memory of the session's agent tree: ``memory`` is the top agent's, sub-agents'
    memories go by their `state_dict` key (``writer.memory``)."""
    base = f"session:{tenant}:{session_id}:memory"
    return base if path == "memory" else f"{base}:{path}"


def session_epoch(tenant: str, session_id: str) -> str:
    """Bumped whenever a session's memory is rewritten, so cached copies know they are stale."""
    return f"session:{tenant}:{session_id}:epoch"


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
