"""The sweep's view of the store: live tasks by when to look at them (once they stood still
for their `stall_s`, or at their deadline), calls held past their approval timeout (the
scripts keep these indexes), and the sweep's lock."""

from __future__ import annotations

from taskyard.plumbing import keys
from taskyard.runtime.store import redis_replies
from taskyard.runtime.store.base import ScriptedStore
from taskyard.runtime.store.script_keys import LiveTaskKeys

__all__ = ["SweepIndex"]


class SweepIndex(ScriptedStore):
    """What the sweep reads and marks."""

    async def due(self, now: float, limit: int = 500) -> list[str]:
        """Live tasks to look at by `now` (a Unix time): stalled, or past their deadline;
        the longest due first."""
        found = await self.r.zrangebyscore(keys.LIVE_TASKS, "-inf", now, start=0, num=limit)
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

    async def look_again(self, task_id: str) -> None:
        """Look at a re-driven task again as the scripts would had it moved now
        (`look_again.lua`)."""
        await self.script("tasks/look_again", LiveTaskKeys(keys.task(task_id)), {})

    async def forget(self, task_id: str) -> None:
        """Drop an ended (or vanished) task from the sweep's view."""
        await self.r.zrem(keys.LIVE_TASKS, task_id)

    async def try_lock(self, name: str, ttl_s: float) -> bool:
        return bool(await self.r.set(name, "1", nx=True, px=int(ttl_s * 1000)))
