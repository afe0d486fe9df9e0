"""/v1/tasks/{task_id}/approvals: a person's decision on a call of the task held for it."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Path, status

from services.gateway.deps import CeleryDep, OwnedTaskDep, StoreDep
from services.gateway.errors import responses
from services.gateway.json_route import JSONRoute
from services.gateway.resources.approvals.models import ApprovalDecided
from taskyard.runtime.approvals import Decision, Outcome, decide

router = APIRouter(prefix="/v1/tasks", tags=["tasks"], route_class=JSONRoute)


@router.post(
    "/{task_id}/approvals/{call_id}",
    response_model=ApprovalDecided,
    responses=responses(401, 404, 409, 413, 422),
)
async def decide_call(
    record: OwnedTaskDep,
    call_id: Annotated[str, Path(min_length=1, max_length=128)],
    body: Decision,
    store: StoreDep,
    celery: CeleryDep,
) -> ApprovalDecided:
    """Approve (optionally with edited `arguments`) or deny (with a `reason` the model reads)
    a call held for approval. 404: no such call waits; 409: it was decided already."""
    outcome = await decide(store, celery, record, call_id, body)
    if outcome == Outcome.UNKNOWN:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="no such call waits for approval")
    if outcome == Outcome.DECIDED:
        raise HTTPException(status.HTTP_409_CONFLICT, detail="this call was decided already")
    state: Literal["approved", "denied"] = "approved" if outcome == Outcome.APPROVED else "denied"
    return ApprovalDecided(call_id=call_id, state=state)
