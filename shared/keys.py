"""Every Redis key and Celery queue name taskyard uses, in one place."""

from __future__ import annotations

import hashlib

__all__ = [
    "AGENT_QUEUE",
    "AGENT_STEP_TASK",
    "TOOL_RUN_TASK",
    "browser_page",
    "browser_results",
    "session_lock",
    "session_memory",
    "task",
    "task_events",
    "task_tool_results",
    "tool_queue",
]

AGENT_QUEUE = "agent"
AGENT_STEP_TASK = "agent.step"
TOOL_RUN_TASK = "tools.run"
TOOL_QUEUE_PREFIX = "tools."


def tool_queue(tool_name: str) -> str:
    """Each tool has its own queue, so each tool pool scales on its own."""
    return f"{TOOL_QUEUE_PREFIX}{tool_name}"


def task(task_id: str) -> str:
    return f"task:{task_id}"


def task_events(task_id: str) -> str:
    return f"task:{task_id}:events"


def task_tool_results(task_id: str, step: int) -> str:
    return f"task:{task_id}:step:{step}:results"


def session_memory(tenant: str, session_id: str) -> str:
    return f"session:{tenant}:{session_id}:memory"


def session_lock(tenant: str, session_id: str) -> str:
    return f"session:{tenant}:{session_id}:task"


def browser_results(session_key: str) -> str:
    """The WebBrowser tool's latest search results for a "tenant:session_id" session key."""
    return f"session:{session_key}:browser"


def browser_page(session_key: str, url: str) -> str:
    """A page the WebBrowser tool opened for a session, keyed by a hash of its URL."""
    return f"session:{session_key}:browser:page:{hashlib.sha256(url.encode()).hexdigest()}"
