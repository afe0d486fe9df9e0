"""The sweep's view of the store: live tasks by the time they last moved and by their
deadline, calls held past their approval timeout (the scripts keep these indexes), and the
sweep's lock."""

from __future__ import annotations

import time

from taskyard.plumbing import keys
from taskyard.runtime.store import redis_replies
from taskyard.runtime.store.base import ScriptedStore

__all__ = ["SweepIndex"]


class SweepIndex(ScriptedStore):
    """What the sweep reads and marks."""

    async def stalled(self, before: float, limit: int = 500) -> list[str]:
        """Live tasks that have not moved since `before` (a Unix time), oldest first."""
        found = await self.r.zrangebyscore(keys.LIVE_TASKS, "-inf", before, start=0, num=limit)
        return redis_replies.members(found)

    async def overdue(self, now: float, limit: int = 500) -> list[str]:
        """Live tasks whose deadline has passed."""
        found = await self.r.zrangebyscore(keys.TASK_DEADLINES, "-inf", now, start=0, num=limit)
        return redis_replies.members(found)

    async def undecided(self, now: float, limit: int = 500) -> list[tuple[str, int, str]]:
        """Calls held for approval past their timeout: (task id, step, call id)."""
        members = await self.r.zrangebyscore(
            keys.APPROVAL_DEADLINES, "-inf", now, start=0, num=limit
        )
        held = [m.split("|") for m in redis_replies.members(members)]
        return [(task_id, int(step), call_id) for task_id, step, call_id in held]

    async def undecided_gone(self, task_id: str, step: int, call_id: str) -> None:
        await self.r.zrem(keys.APPROVAL_DEADLINES, f"{task_id}|{step}|{call_id}")

    async def touch(self, task_id: str) -> None:
        """Count the task as moved now (after the sweep re-drove it)."""
        await self.r.zadd(keys.LIVE_TASKS, {task_id: time.time()}, xx=True)

    async def forget(self, task_id: str) -> None:
        """Drop an ended (or vanished) task from the sweep's view."""
        await self.r.zrem(keys.LIVE_TASKS, task_id)
        await self.r.zrem(keys.TASK_DEADLINES, task_id)

    async def try_lock(self, name: str, ttl_s: float) -> bool:
        return bool(await self.r.set(name, "1", nx=True, px=int(ttl_s * 1000)))
