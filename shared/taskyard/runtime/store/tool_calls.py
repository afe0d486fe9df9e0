"""Tool calls in the store: their results (the one that completes a step pushes the next
step), and the claims a tool worker holds on the calls it runs. Scripts: `lua/tool_calls/`."""

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
    PutToolResultDoc,
    ReleaseClaimsDoc,
    ResultClaimDoc,
    jobs,
)
from taskyard.runtime.store.script_keys import ClaimCallKeys, PutToolResultKeys, WorkerClaimsKeys
from taskyard.runtime.store.script_replies import RESULT_STORED, decode

__all__ = ["CallClaim", "CallClaimed", "ToolCalls", "ToolResultStored", "call_claim"]

CallClaimed = Literal["claimed", "done", "busy", "ended"]
"""Whether a worker runs a call: `claimed` it does, `busy` another holds it, `done` its result
is in, `ended` its task has (it is not run)."""


@dataclass(frozen=True, slots=True)
class CallClaim:
    """A tool worker's claim on the call whose result it stores: freed with the write, which
    also stamps the last use on the session's sandbox record (`session_key`, when the call
    used an interpreter), keeps that record `record_ttl_s` longer and records the `cells`
    the call ran there."""

    worker: str
    session_key: str | None = None
    record_ttl_s: float = 0
    cells: CellsDoc | None = None


@dataclass(frozen=True, slots=True)
class ToolResultStored:
    """`complete`: every call of the step has its result; `advance`: this caller alone must
    start the next step."""

    complete: bool
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
        claim: CallClaim | None = None,
    ) -> ToolResultStored:
        """Store one call's result (first write wins) and publish it, while the task lives;
        with no message, only look whether the step's results are complete. The caller whose
        result completes the step pushes `next_step`, in the same atomic step; a worker that
        claimed the call frees its `claim` there too (and marks its interpreter alive)."""
        claim_keys: tuple[str, ...] = ()
        doc = PutToolResultDoc(
            store_db=self.db, broker_db=self.broker_db, step=str(step), call_id=call_id,
            message=message.model_dump_json() if message is not None else "",
            ttl_s=RETENTION_S, next_step=jobs([next_step]),
        )  # fmt: skip
        if claim is not None:
            session = claim.session_key or "-"
            claim_keys = (keys.tool_call_claim(task_id, step, call_id),
                          keys.tool_worker_claims(claim.worker), keys.session_sandbox(session),
                          keys.session_cells(session))  # fmt: skip
            doc["claim"] = ResultClaimDoc(
                worker=claim.worker, used=f"{time.time():.3f}" if claim.session_key else "",
                record_ttl_s=max(1, int(claim.record_ttl_s)),
            )  # fmt: skip
            if claim.cells is not None and claim.cells["codes"]:
                doc["cells"] = claim.cells
        keys_ = PutToolResultKeys(
            results=keys.task_tool_results(task_id, step), task=keys.task(task_id),
            events=keys.task_events(task_id), advanced=keys.task_advanced(task_id, step),
            claim=claim_keys,
        )  # fmt: skip
        raw = await self.script("tool_calls/put_tool_result", keys_, doc)
        reply = decode(RESULT_STORED, raw)
        if reply.outcome == "ended":
            return ToolResultStored(False, False, live=False)
        return ToolResultStored(reply.outcome == "complete", reply.advance)

    async def tool_results(
        self, task_id: str, step: int, calls: Sequence[ToolCall]
    ) -> list[AgentMessage]:
        """Results in the order the model made the calls."""
        raw = await self.r.hmget(keys.task_tool_results(task_id, step), [c.id for c in calls])
        return [AgentMessage.model_validate_json(m) for m in raw if m is not None]

    async def claim_call(
        self, task_id: str, step: int, call_id: str, worker: str, ttl_s: float
    ) -> CallClaimed:
        """Claim a tool call for `worker` (its label) to run, in one round trip: `ended` if its
        task has (a cancel while the job waited), `done` if its result is in, `busy` while
        another holds it (a claim lapses after `ttl_s`, when that worker starts again, or as
        its result is stored)."""
        keys_, doc = call_claim(task_id, step, call_id, worker, ttl_s)
        claimed: CallClaimed = await self.script("tool_calls/claim_call", keys_, doc)
        return claimed

    async def release_call(self, task_id: str, step: int, call_id: str, worker: str) -> None:
        """Free a claim without storing a result (the call failed; a retry may run it)."""
        claim = keys.tool_call_claim(task_id, step, call_id)
        async with self.r.pipeline(transaction=True) as pipe:
            pipe.delete(claim)
            pipe.srem(keys.tool_worker_claims(worker), claim)
            await pipe.execute()

    async def release_worker_claims(self, worker: str) -> int:
        """Free every claim a worker of this label held (it is starting again): their calls
        can run at once. How many it freed."""
        doc = ReleaseClaimsDoc(worker=worker)
        keys_ = WorkerClaimsKeys(keys.tool_worker_claims(worker))
        return int(await self.script("tool_calls/release_claims", keys_, doc))


def call_claim(
    task_id: str, step: int, call_id: str, worker: str, ttl_s: float
) -> tuple[ClaimCallKeys, ClaimCallDoc]:
    """The keys and document of `worker`'s claim on a call (`ToolCalls.claim_call`; with the
    session's claim: `SandboxDirectory.claim_run`)."""
    keys_ = ClaimCallKeys(keys.task_tool_results(task_id, step),
                          keys.tool_call_claim(task_id, step, call_id),
                          keys.tool_worker_claims(worker), keys.task(task_id))  # fmt: skip
    return keys_, ClaimCallDoc(call_id=call_id, worker=worker, ttl_ms=int(ttl_s * 1000))
