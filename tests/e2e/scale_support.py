"""Sessions that count, cell after cell, across several tool workers: what test_scale_out.py
(workers as processes) and test_several_hosts.py (workers on hosts of their own) both run and
check. A session named `<anything>-<n>` starts at n * 100 and adds one a cell, so its outputs
show whether its interpreter kept its state."""

from __future__ import annotations

import re

from e2e_support import tool_output, wait_status

from devstack.stack import LocalStack
from taskyard.client import TaskyardClient

LOST = "Note: state lost ("  # how a cell's output says its session's interpreter was lost


def cell(value: int, index: int) -> str:
    """The task text of a session's cell `index`: the first sets x, each later one adds 1."""
    if index == 0:
        return f"```python\nx = {value}\nprint(x)\n```"
    # A lost interpreter starts over at 1 instead of raising NameError for every later cell.
    return '```python\nx = globals().get("x", 0) + 1\nprint(x)\n```'


def number(session: str) -> int:
    """The value a session's first cell sets."""
    return int(session.rsplit("-", 1)[1]) * 100


def task_output(client: TaskyardClient, task_id: str, timeout: float = 120) -> str:
    """What the succeeded task's cell printed."""
    task = wait_status(client, task_id, timeout=timeout)
    assert task["status"] == "succeeded", task
    return tool_output(task)


def values(outputs: list[str]) -> list[int]:
    """The last number each output printed."""
    return [int(re.findall(r"-?\d+", out.strip().splitlines()[-1])[-1]) for out in outputs]


def kept(outputs: list[str], session: str, cells: int) -> bool:
    """Whether the session's `cells` cells counted on from its number without a break."""
    return values(outputs) == [number(session) + i for i in range(cells)]


def holder(client: TaskyardClient, session_id: str) -> str | None:
    """The tool worker holding the session's live interpreter, if any."""
    interpreter = client.session(session_id, limit=1).get("interpreter")
    return interpreter["worker"] if interpreter and interpreter["alive"] else None


def has_state(client: TaskyardClient, session_id: str) -> bool:
    """Whether a call finished in the session's interpreter (else it has no state to lose)."""
    interpreter = client.session(session_id, limit=1).get("interpreter")
    return bool(interpreter and interpreter["last_used"])


def worker_process(stack: LocalStack, node: str) -> str:
    """The stack's process name (its host's name too) of the tool worker on Celery node `node`."""
    return {n: name for name, n in stack.tool_worker_nodes().items()}[node.split("@")[0]]
