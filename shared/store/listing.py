"""A tenant's tasks, newest first, a page at a time.

Each tenant (and each session) has an index of its task ids scored by creation time (written
by `create_task.lua`). A page reads the index from the cursor down and keeps the tasks that
pass the filters; the cursor is the last task looked at, so a filtered page may be shorter
than `limit` and the next page goes on from where this one stopped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from shared import keys
from shared.store import replies
from shared.store.store import TaskStore
from shared.task import TaskRecord, TaskStatus

__all__ = ["CURSOR_PATTERN", "TaskPage", "list_tasks"]

CURSOR_PATTERN = r"^\d{1,12}(\.\d{1,9})?~task_[0-9a-f]{32}$"  # "<created at>~<task id>"
_CURSOR = re.compile(CURSOR_PATTERN)
_SCAN_FACTOR = 10  # a filtered page looks at most this many times `limit` tasks


@dataclass(frozen=True, slots=True)
class TaskPage:
    tasks: list[TaskRecord]
    next_cursor: str | None


def _after(cursor: str | None) -> tuple[str, float, str]:
    """The index's upper bound for a page and the task the previous page ended on."""
    if cursor is None:
        return "+inf", float("inf"), ""
    if not _CURSOR.fullmatch(cursor):
        raise ValueError("cursor must be a next_cursor an earlier page returned")
    score, _, task_id = cursor.partition("~")
    return score, float(score), task_id


def _is_after(score: float, task_id: str, last_score: float, last_id: str) -> bool:
    # Newest first: by score, then (same score) by id descending, as ZREVRANGEBYSCORE orders.
    return score < last_score or (score == last_score and task_id < last_id)


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
    scanned = replies.scored(
        await store.r.zrevrangebyscore(
            index, top, "-inf", start=0, num=limit * _SCAN_FACTOR + 1, withscores=True
        )
    )
    candidates = [(t, s) for t, s in scanned if _is_after(s, t, last_score, last_id)]
    page, looked = await _filtered(store, candidates, limit, status)
    more = len(looked) < len(candidates) or len(scanned) > limit * _SCAN_FACTOR
    next_cursor = f"{looked[-1][1]!r}~{looked[-1][0]}" if more and looked else None
    return TaskPage(page, next_cursor)


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
