"""Calls held for a person's approval, in the store: what a step holds, and a decision
applied (an approved call's job pushed, a denial stored as the call's result). Script:
`lua/approvals/`. (A commit holds the calls: `Steps.commit_step`.)"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from taskyard.agentkit.schema import AgentMessage, ToolCall
from taskyard.plumbing import keys
from taskyard.plumbing.keys import RETENTION_S
from taskyard.runtime.events import dumps
from taskyard.runtime.jobs import Envelope
from taskyard.runtime.store import redis_replies
from taskyard.runtime.store.base import ScriptedStore
from taskyard.runtime.store.documents import DecideApprovalDoc, jobs
from taskyard.runtime.store.script_keys import DecideApprovalKeys
from taskyard.runtime.store.script_replies import APPROVAL, ApprovalOutcome, decode
from taskyard.runtime.task import TaskRecord

__all__ = ["Approvals"]


class Approvals(ScriptedStore):
    """Held calls and the decisions on them."""

    async def approvals(self, task_id: str, step: int) -> dict[str, dict[str, Any]]:
        """The step's calls held for approval: call id to its state (`state`, `call`,
        `reason`)."""
        raw = redis_replies.fields(await self.r.hgetall(keys.task_approvals(task_id, step)))
        return {call_id: orjson.loads(state) for call_id, state in raw.items()}

    async def was_held(self, task_id: str, before_step: int, call_id: str) -> bool:
        """Whether a step of the task before `before_step` held `call_id` for approval."""
        async with self.r.pipeline(transaction=False) as pipe:
            for step in range(max(0, before_step)):
                pipe.hexists(keys.task_approvals(task_id, step), call_id)
            return any(await pipe.execute())

    async def decide_approval(
        self,
        record: TaskRecord,
        call: ToolCall,
        decided: Mapping[str, Any],
        tool_job: Envelope | None,
        denial: AgentMessage | None,
        next_step: Envelope,
    ) -> tuple[ApprovalOutcome, str]:
        """Apply a decision on a held call of the task's current step (see
        `decide_approval.lua`): ('approved' | 'denied' | 'unknown' | 'decided', state).
        With `tool_job` the call is approved, else denied with `denial` as its result."""
        step = record.step - 1
        keys_ = DecideApprovalKeys(
            task=keys.task(record.id), events=keys.task_events(record.id),
            approvals=keys.task_approvals(record.id, step),
            results=keys.task_tool_results(record.id, step),
        )  # fmt: skip
        event = {"call_id": call.id, **{k: v for k, v in decided.items() if k != "call"}}
        doc = DecideApprovalDoc(
            store_db=self.db, broker_db=self.broker_db, step=str(step), call_id=call.id,
            state=dumps(dict(decided)), event=dumps(event), tool_job=jobs([tool_job]),
            denial=denial.model_dump_json() if denial else "", ttl_s=RETENTION_S,
            next_step=jobs([next_step]), waiting_event=dumps({"status": "waiting_tools"}),
        )  # fmt: skip
        reply = decode(APPROVAL, await self.script("approvals/decide_approval", keys_, doc))
        return reply.outcome, reply.state
