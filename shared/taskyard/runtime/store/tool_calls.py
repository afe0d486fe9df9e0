"""Tool calls in the store: their results (the one that completes a step pushes the next
step), and the claims a tool worker holds on the calls it runs (each naming the run of the
worker that took it, so a claim of a dead or restarted worker holds nothing back). Scripts:
`lua/tool_calls/`."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from taskyard.agentkit.schema import AgentMessage, ToolCall
from taskyard.plumbing import keys
from taskyard.plumbing.keys import RETENTION_S
from taskyard.runtime.jobs import Envelope
from taskyard.runtime.store.base import ScriptedStore
from taskyard.runtime.store.documents import (
    CellsDoc,
    ClaimCallDoc,
    InterpreterUseDoc,
    PutToolResultDoc,
    jobs,
)
from taskyard.runtime.store.script_keys import ClaimCallKeys, PutToolResultKeys
from taskyard.runtime.store.script_replies import RESULT_STORED, decode

__all__ = ["CallClaimed", "InterpreterUse", "ToolCalls", "ToolResultStored", "call_claim"]

CallClaimed = Literal["claimed", "done", "busy", "ended"]
"""Whether a worker runs a call: `claimed` it does, `busy` another holds it, `done` its result
is in, `ended` its task has (it is not run)."""


@dataclass(frozen=True, slots=True)
class InterpreterUse:
    """A call run in the session's interpreter (`session_key`), stamped with its result: the
    last use on the session's sandbox record, which is kept `record_ttl_s` longer, and the
    `cells` the call ran there."""

    session_key: str
    record_ttl_s: float
    cells: CellsDoc | None = None


@dataclass(frozen=True, slots=True)
class ToolResultStored:
    """`advance`: this result completed the step's calls, and the write pushed the next step
    (one caller alone); `live`: the task had not ended."""

    advance: bool
    live: bool = True


class ToolCalls(ScriptedStore):
    """Tool calls' results and claims."""

    async def put_tool_result(
        self,
        task_id: str,
        step: int,
        call_id: str,
        message: AgentMessage | None,
        next_step: Envelope | None = None,
        used: InterpreterUse | None = None,
    ) -> ToolResultStored:
        """Store one call's result (first write wins) and publish it, while the task lives;
        with no message, only look whether the step's results are complete. The caller whose
        result completes the step pushes `next_step`, in the same atomic step; a call run in
        the session's interpreter is stamped there too (`used`)."""
        interpreter: tuple[str, ...] = ()
        doc = PutToolResultDoc(
            store_db=self.db, broker_db=self.broker_db, step=str(step), call_id=call_id,
            message=message.model_dump_json() if message is not None else "",
            ttl_s=RETENTION_S, next_step=jobs([next_step]),
        )  # fmt: skip
        if used is not None:
            interpreter = (keys.session_sandbox(used.session_key),
                           keys.session_cells(used.session_key))  # fmt: skip
            ttl_s = max(1, int(used.record_ttl_s))
            doc["used"] = InterpreterUseDoc(at=f"{time.time():.3f}", record_ttl_s=ttl_s)
            if used.cells is not None and used.cells["codes"]:
                doc["cells"] = used.cells
        keys_ = PutToolResultKeys(
            results=keys.task_tool_results(task_id, step), task=keys.task(task_id),
            events=keys.task_events(task_id), interpreter=interpreter,
        )  # fmt: skip
        raw = await self.script("tool_calls/put_tool_result", keys_, doc)
        reply = decode(RESULT_STORED, raw)
        if reply.outcome == "ended":
            return ToolResultStored(False, live=False)
        return ToolResultStored(reply.outcome == "advanced")

    async def tool_results(
        self, task_id: str, step: int, calls: Sequence[ToolCall]
    ) -> list[AgentMessage]:
        """Results in the order the model made the calls."""
        raw = await self.r.hmget(keys.task_tool_results(task_id, step), [c.id for c in calls])
        return [AgentMessage.model_validate_json(m) for m in raw if m is not None]

    async def claim_call(
        self, task_id: str, step: int, call_id: str, worker: str, incarnation: str, ttl_s: float
    ) -> CallClaimed:
        """Claim a tool call for `worker` (its node name; `incarnation`: this run of it) to
        run, in one round trip: `ended` if its task has (a cancel while the job waited),
        `done` if its result is in, `busy` while another live run holds it (a claim lapses
        after `ttl_s`, or as soon as its worker's heartbeat does or the worker starts again)."""
        keys_, doc = call_claim(task_id, step, call_id, worker, incarnation, ttl_s)
        claimed: CallClaimed = await self.script("tool_calls/claim_call", keys_, doc)
        return claimed

    async def release_call(self, task_id: str, step: int, call_id: str) -> None:
        """Free a claim without storing a result (the call failed; a retry may run it)."""
        await self.r.delete(keys.tool_call_claim(task_id, step, call_id))


def call_claim(
    task_id: str, step: int, call_id: str, worker: str, incarnation: str, ttl_s: float
) -> tuple[ClaimCallKeys, ClaimCallDoc]:
    """The keys and document of `worker`'s claim on a call (`ToolCalls.claim_call`; with the
    session's claim: `SandboxDirectory.claim_run`)."""
    claim = keys.tool_call_claim(task_id, step, call_id)
    keys_ = ClaimCallKeys(keys.task_tool_results(task_id, step), claim, keys.task(task_id))
    doc = ClaimCallDoc(call_id=call_id, worker=worker, incarnation=incarnation,
                       ttl_ms=int(ttl_s * 1000))  # fmt: skip
    return keys_, doc
