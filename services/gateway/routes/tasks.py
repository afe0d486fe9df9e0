"""/v1/tasks: submit a task, read it, follow its events."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Header, HTTPException, status
from fastapi.responses import StreamingResponse

from services.gateway.deps import AsyncRedisDep, CeleryDep, StoreDep, TenantDep
from services.gateway.models import TaskAccepted, TaskCreate, TaskPublic
from services.gateway.sse import event_stream
from shared import keys
from shared.actions import openai_tool_schemas
from shared.agents import AGENTS
from shared.registry import RegistryError
from shared.spec import AgentSpec
from shared.store import TaskStore
from shared.task import TaskRecord, TaskStatus

router = APIRouter(prefix="/v1/tasks", tags=["tasks"])


@router.post("", status_code=status.HTTP_202_ACCEPTED, response_model=TaskAccepted)
def create_task(
    body: TaskCreate,
    tenant: TenantDep,
    store: StoreDep,
    celery: CeleryDep,
    idempotency_key: Annotated[str | None, Header(max_length=256)] = None,
) -> TaskAccepted:
    """Accept a task: store it and enqueue its first step (or queue it behind its session)."""
    _check_registered(body.agent)
    record = TaskRecord(
        tenant=tenant,
        session_id=body.session_id or uuid.uuid4().hex,
        input=body.input,
        spec=body.agent,
    )
    if body.if_session_busy == "reject" and store.session_busy(record):
        raise HTTPException(status.HTTP_409_CONFLICT, detail="session is running another task")
    stored = store.create(record, idempotency_key)
    if stored.id == record.id and store.claim_session(record):
        celery.send_task(keys.AGENT_STEP_TASK, args=[record.id, 0], queue=keys.AGENT_QUEUE)
    return TaskAccepted(id=stored.id, status=stored.status, session_id=stored.session_id)


@router.get("/{task_id}", response_model=TaskPublic)
def get_task(task_id: str, tenant: TenantDep, store: StoreDep) -> TaskPublic:
    """The task's status, result and every message so far."""
    record = _owned(store, task_id, tenant)
    return TaskPublic.of(record, store.messages(task_id))


@router.get("/{task_id}/events", response_class=StreamingResponse)
def follow_task(
    task_id: str,
    tenant: TenantDep,
    store: StoreDep,
    r: AsyncRedisDep,
    last_event_id: Annotated[str | None, Header()] = None,
) -> StreamingResponse:
    """Server-sent events: every status change, message and model token, ending after the last.

    Reconnect with `Last-Event-ID` to resume after the last event received."""
    _owned(store, task_id, tenant)
    return StreamingResponse(
        event_stream(r, task_id, last_event_id or "0"),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


@router.post("/{task_id}/cancel", response_model=TaskAccepted)
def cancel_task(
    task_id: str, tenant: TenantDep, store: StoreDep, celery: CeleryDep
) -> TaskAccepted:
    """End a task now. A step in flight is not applied; the session passes to the next task."""
    record = _owned(store, task_id, tenant)
    if not store.set_status(task_id, TaskStatus.CANCELLED, error="cancelled by the client"):
        ended = store.get(task_id) or record
        raise HTTPException(status.HTTP_409_CONFLICT, detail=f"task already {ended.status}")
    following = store.release_session(record)
    if following:
        celery.send_task(keys.AGENT_STEP_TASK, args=[following, 0], queue=keys.AGENT_QUEUE)
    return TaskAccepted(id=task_id, status=TaskStatus.CANCELLED, session_id=record.session_id)


def _check_registered(spec: AgentSpec) -> None:
    """Unknown tool or agent names are the caller's error (422), not a task that fails later."""
    try:
        openai_tool_schemas(spec.tools)
        if spec.agent is not None:
            AGENTS.get(spec.agent)
    except RegistryError as exc:
        field = "agent" if spec.agent is not None and spec.agent not in AGENTS else "tools"
        detail = [{"loc": ["body", "agent", field], "msg": str(exc), "type": "value_error"}]
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, detail=detail) from exc


def _owned(store: TaskStore, task_id: str, tenant: str) -> TaskRecord:
    record = store.get(task_id)
    if record is None or record.tenant != tenant:  # another tenant's task does not exist for you
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"task {task_id!r} not found")
    return record
