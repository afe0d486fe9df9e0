"""The chaos run's tasks, and their submission through the gateway at a steady pace.

Every task is two steps: the scripted model runs the task's ```python block with the code
tool, then answers quoting the cell's output. The cell prints a value only it computes
(``value=<token * 7>``), and keeps a log of the tokens its kernel ran, so a cell that ran
twice in one kernel shows in its own output (``runs=2``) and in every later cell's of the
session (``reran=[...]``).
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field

import httpx

__all__ = ["TOKEN", "ChaosTask", "Submitted", "make_tasks", "submit_paced"]

_CELL = """```python
_t = {token}
_log = globals().setdefault("_chaos_log", [])
_log.append(_t)
print("token=%d value=%d runs=%d reran=%s"
      % (_t, _t * 7, _log.count(_t), sorted({{t for t in _log if _log.count(t) > 1}})))
```"""
_FIRST_TOKEN = 1_000_001
_RETRY_PAUSE_S = 0.5
TOKEN = re.compile(r"(?:_t = |token=)(\d+)")  # a task's token, in any of its messages


@dataclass(frozen=True, slots=True)
class ChaosTask:
    """One task to submit: its unique token, its session, its Idempotency-Key."""

    token: int
    session_id: str

    @property
    def body(self) -> dict[str, str]:
        return {"input": _CELL.format(token=self.token), "session_id": self.session_id}

    @property
    def idempotency_key(self) -> str:
        return f"chaos-{self.token}"

    @property
    def expected(self) -> str:
        """What a right result holds: the value only the cell computes."""
        return f"value={self.token * 7} "


def make_tasks(count: int, sessions: int) -> list[ChaosTask]:
    """`count` tasks dealt round-robin over `sessions` sessions."""
    return [ChaosTask(_FIRST_TOKEN + i, f"chaos-{i % sessions}") for i in range(count)]


@dataclass
class Submitted:
    """What the gateway answered: task ids by token (202s), refusals by status, retries."""

    accepted: dict[int, str] = field(default_factory=dict)
    refused: dict[str, int] = field(default_factory=dict)
    retries: int = 0


def submit_paced(
    url: str, key: str, tasks: list[ChaosTask], window_s: float, patience_s: float
) -> Submitted:
    """POST the tasks spread evenly over `window_s`. A transport error or a 5xx is retried
    with the same Idempotency-Key for up to `patience_s` (Redis may be restarting); any other
    answer but 202 is a refusal."""
    return asyncio.run(_submit_all(url, key, tasks, window_s, patience_s))


async def _submit_all(
    url: str, key: str, tasks: list[ChaosTask], window_s: float, patience_s: float
) -> Submitted:
    out = Submitted()
    start = time.monotonic()
    gap = window_s / max(len(tasks), 1)
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as http:

        async def one(index: int, task: ChaosTask) -> None:
            await asyncio.sleep(max(0.0, start + index * gap - time.monotonic()))
            await _submit(http, task, patience_s, out)

        await asyncio.gather(*(one(i, task) for i, task in enumerate(tasks)))
    return out


async def _submit(
    http: httpx.AsyncClient, task: ChaosTask, patience_s: float, out: Submitted
) -> None:
    headers = {"Idempotency-Key": task.idempotency_key}
    give_up = time.monotonic() + patience_s
    while True:
        try:
            resp = await http.post("/v1/tasks", json=task.body, headers=headers)
            status = resp.status_code
        except httpx.TransportError:
            status = 0  # no answer: the same as a 5xx, try again
        if status == 202:
            out.accepted[task.token] = resp.json()["id"]
            return
        if (status == 0 or status >= 500) and time.monotonic() < give_up:
            out.retries += 1
            await asyncio.sleep(_RETRY_PAUSE_S)
            continue
        reason = f"HTTP {status}" if status else "no answer"
        out.refused[reason] = out.refused.get(reason, 0) + 1
        return
