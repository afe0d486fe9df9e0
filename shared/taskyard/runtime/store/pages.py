"""A tenant's tasks, newest first, and its sessions, the most recently used first, a page at
a time.

Each tenant (and each session) has an index of its task ids scored by creation time (written
by `create_task.lua`). A page reads the index from the cursor down and keeps the tasks that
pass the filters; the cursor is the last task looked at, so a filtered page may be shorter
than `limit` and the next page goes on from where this one stopped.

Each tenant also has an index of its session ids scored by their latest task's creation time
(written by the same script): a session that gets a new task moves to the top, so a client
paging meanwhile never sees it twice (and misses it if it moves above the pages read).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from taskyard.plumbing import keys
from taskyard.plumbing.keys import TASK_ID_PATTERN
from taskyard.runtime.store import redis_replies
from taskyard.runtime.store.store import TaskStore
from taskyard.runtime.task import SESSION_ID_PATTERN, TaskRecord, TaskStatus

__all__ = [
    "CURSOR_PATTERN",
    "SESSION_CURSOR_PATTERN",
    "SessionPage",
    "TaskPage",
    "list_sessions",
    "list_tasks",
]

_SCORE = r"\d{1,12}(\.\d{1,9})?"  # a time as `repr` writes it
CURSOR_PATTERN = rf"^{_SCORE}~{TASK_ID_PATTERN[1:-1]}$"  # "<created at>~<task id>"
# "<its latest task's creation time>~<session id>"
SESSION_CURSOR_PATTERN = rf"^{_SCORE}~{SESSION_ID_PATTERN[1:-1]}$"
_CURSOR = re.compile(CURSOR_PATTERN)
_SESSION_CURSOR = re.compile(SESSION_CURSOR_PATTERN)
_SCAN_FACTOR = 10  # a filtered page looks at most this many times `limit` tasks


@dataclass(frozen=True, slots=True)
class TaskPage:
    tasks: list[TaskRecord]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class SessionPage:
    sessions: list[tuple[str, float]]  # each session's id, its latest task's creation time
    next_cursor: str | None


def _after(cursor: str | None, shape: re.Pattern[str] = _CURSOR) -> tuple[str, float, str]:
    """The index's upper bound for a page and the member the previous page ended on."""
    if cursor is None:
        return "+inf", float("inf"), ""
    if not shape.fullmatch(cursor):
        raise ValueError("cursor must be a next_cursor an earlier page returned")
    score, _, member = cursor.partition("~")
    return score, float(score), member


def _cursor(member: str, score: float) -> str:
    return f"{score!r}~{member}"


def _is_after(score: float, member: str, last_score: float, last_id: str) -> bool:
    # Newest first: by score, then (same score) by id descending, as ZREVRANGEBYSCORE orders.
    return score < last_score or (score == last_score and member < last_id)


async def list_tasks(
    store: TaskStore,
    tenant: str,
    limit: int,
    cursor: str | None = None,
    status: TaskStatus | None = None,
    session_id: str | None = None,
) -> TaskPage:
    """The tenant's tasks (of one session, of one status) after `cursor`, newest first."""
    index = keys.session_tasks(tenant, session_id) if session_id else keys.tenant_tasks(tenant)
    top, last_score, last_id = _after(cursor)
    scanned = redis_replies.scored(
        await store.r.zrevrangebyscore(
            index, top, "-inf", start=0, num=limit * _SCAN_FACTOR + 1, withscores=True
        )
    )
    candidates = [(t, s) for t, s in scanned if _is_after(s, t, last_score, last_id)]
    page, looked = await _filtered(store, candidates, limit, status)
    more = len(looked) < len(candidates) or len(scanned) > limit * _SCAN_FACTOR
    next_cursor = _cursor(*looked[-1]) if more and looked else None
    return TaskPage(page, next_cursor)


async def list_sessions(
    store: TaskStore, tenant: str, limit: int, cursor: str | None = None
) -> SessionPage:
    """The tenant's sessions after `cursor`, the most recently used first."""
    index = keys.tenant_sessions(tenant)
    top, last_score, last_id = _after(cursor, _SESSION_CURSOR)
    # Sessions used at the cursor's very time come first, those listed already among them.
    ties = await store.r.zcount(index, top, top) if cursor else 0
    scanned = redis_replies.scored(
        await store.r.zrevrangebyscore(
            index, top, "-inf", start=0, num=ties + limit + 1, withscores=True
        )
    )
    after = [(s, score) for s, score in scanned if _is_after(score, s, last_score, last_id)]
    page = after[:limit]
    return SessionPage(page, _cursor(*page[-1]) if len(after) > limit else None)


async def _filtered(
    store: TaskStore, candidates: list[tuple[str, float]], limit: int, status: TaskStatus | None
) -> tuple[list[TaskRecord], list[tuple[str, float]]]:
    """Up to `limit` tasks that pass, and the candidates looked at to find them."""
    page: list[TaskRecord] = []
    looked: list[tuple[str, float]] = []
    for start in range(0, len(candidates), limit):
        batch = candidates[start : start + limit]
        for (task_id, score), record in zip(batch, await store.get_many([t for t, _ in batch]),
                                            strict=True):  # fmt: skip
            looked.append((task_id, score))
            if record is not None and (status is None or record.status == status):
                page.append(record)
                if len(page) == limit:
                    return page, looked
    return page, looked
