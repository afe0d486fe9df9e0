"""/v1/tasks: submit a task, list them, read one, follow its events, cancel it."""

from __future__ import annotations

import hashlib
import re
import uuid
from typing import Annotated

from fastapi import APIRouter, Header, HTTPException, Query, status
from opentelemetry import trace

from services.gateway.deps import (
    CeleryDep,
    HubDep,
    OwnedTaskDep,
    SettingsDep,
    StoreDep,
    TenantDep,
)
from services.gateway.errors import issue, refused, responses
from services.gateway.json_route import JSONRoute
from services.gateway.metrics import TASKS_ACCEPTED
from services.gateway.resources.files.deps import SessionFilesDep
from services.gateway.resources.tasks.models import (
    TaskAccepted,
    TaskCreate,
    TaskList,
    TaskPublic,
    TaskSummary,
)
from services.gateway.sse import EventStream
from taskyard.plumbing.tracing import job_attributes
from taskyard.runtime.cancel import cancel
from taskyard.runtime.events import EventKind
from taskyard.runtime.store import TaskStore, pages
from taskyard.runtime.store.pages import CURSOR_PATTERN
from taskyard.runtime.submission import SubmissionRefused, check_offered, submit
from taskyard.runtime.task import SESSION_ID_PATTERN, TaskStatus
from taskyard.runtime.webhooks import deliveries

_NOT_STORED = (
    "Redis does not answer, no replica confirmed the task in time (the task may exist: send it "
    "again with the same `Idempotency-Key`), or the session's sandbox cannot list the task's "
    "`files`."
)
router = APIRouter(prefix="/v1/tasks", tags=["tasks"], route_class=JSONRoute)

_ENTRY_ID_PATTERN = r"^\d{1,19}(-\d{1,19})?$"  # 19 digits: always within Redis's 64 bits
_ENTRY_ID = re.compile(_ENTRY_ID_PATTERN)
# What became of a submitted task, by the store's outcome and whether it holds its session.
_ACCEPTED = {
    ("created", True): "queued",
    ("created", False): "waiting",
    ("existing", False): "existing",
    ("busy", False): "rejected",
}
_EVENT = {  # one server-sent event (in OpenAPI 3.1, `schema` of an event stream is per event)
    "type": "object",
    "required": ["id", "event", "data"],
    "properties": {
        "id": {"type": "string", "pattern": _ENTRY_ID_PATTERN},
        "event": {"enum": [kind.value for kind in EventKind]},
        "data": {"type": "string", "contentMediaType": "application/json"},
    },
}
_EVENT_STREAM = {
    "description": "The task's events as server-sent events, the last one its final status; "
    "`: keep-alive` comments while nothing happens.",
    "content": {"text/event-stream": {"schema": _EVENT}},
}


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=TaskAccepted,
    responses=responses(401, 409, 413, 422, 503, 504, why={503: _NOT_STORED}),
)
async def create_task(
    body: TaskCreate,
    tenant: TenantDep,
    store: StoreDep,
    celery: CeleryDep,
    settings: SettingsDep,
    files: SessionFilesDep,
    idempotency_key: Annotated[str | None, Header(min_length=1, max_length=256)] = None,
) -> TaskAccepted:
    """Accept a task: store it and enqueue its first step (or, while its session runs
    another task, do as `if_session_busy` says), answering once as many replicas hold it as
    the settings ask (`accept_replicas`). The `files` it names must be in the session's
    sandbox (asked of its tool worker)."""
    try:
        check_offered(body.agent)
        session_id = body.session_id or uuid.uuid4().hex
        attached = await files.attached(tenant, session_id, body.files)
        record = body.record(tenant, session_id, attached)
        fingerprint = hashlib.sha256(body.model_dump_json().encode()).hexdigest()
        trace.get_current_span().set_attributes(job_attributes(record.id, session_id, tenant))
        created = await submit(
            store, celery, settings, record, body.busy_policy(), idempotency_key, fingerprint
        )
    except SubmissionRefused as exc:
        raise refused(exc) from exc
    TASKS_ACCEPTED.labels(_ACCEPTED[created.outcome, created.holds_session]).inc()
    if created.outcome == "busy":
        detail = f"session {session_id} is running task {created.task_id} (if_session_busy=reject)"
        raise HTTPException(status.HTTP_409_CONFLICT, detail=detail)
    if created.outcome == "existing":
        return await _existing(store, created.task_id, created.fingerprint == fingerprint)
    return TaskAccepted(id=record.id, status=record.status, session_id=record.session_id)


async def _existing(store: TaskStore, task_id: str, same_body: bool) -> TaskAccepted:
    if not same_body:
        msg = "this Idempotency-Key was used with a different request body"
        detail = [issue(["header", "idempotency-key"], msg)]
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, detail=detail)
    record = await store.get(task_id)
    if record is None:
        raise HTTPException(
            status.HTTP_409_CONFLICT, detail="the key's task is gone; use a new key"
        )
    return TaskAccepted(id=record.id, status=record.status, session_id=record.session_id)


@router.get("", response_model=TaskList, responses=responses(401, 422))
async def list_tasks(
    tenant: TenantDep,
    store: StoreDep,
    status_: Annotated[TaskStatus | None, Query(alias="status")] = None,
    session_id: Annotated[str | None, Query(pattern=SESSION_ID_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(pattern=CURSOR_PATTERN)] = None,
) -> TaskList:
    """The tenant's tasks, newest first, a page at a time (`cursor` from the last page);
    optionally of one session, of one status."""
    page = await pages.list_tasks(store, tenant, limit, cursor, status_, session_id)
    return TaskList(tasks=[TaskSummary.of(r) for r in page.tasks], next_cursor=page.next_cursor)


@router.get("/{task_id}", response_model=TaskPublic, responses=responses(401, 404))
async def get_task(record: OwnedTaskDep, store: StoreDep, settings: SettingsDep) -> TaskPublic:
    """The task's status, result, deadline, every message so far, and the calls of its
    current step held for approval."""
    approvals = await store.approvals(record.id, record.step - 1) if record.step else {}
    children = [c for c in await store.get_many(await store.children(record.id)) if c]
    told = await deliveries(store, record.id) if record.webhook else []
    messages = await store.messages(record.id)
    deadline_s = record.deadline(settings.task_deadline_s)
    return TaskPublic.of(record, messages, approvals, children, told, deadline_s=deadline_s)


@router.get(
    "/{task_id}/events",
    status_code=status.HTTP_200_OK,  # else FastAPI looks for it in the response's __init__
    response_class=EventStream,
    responses={200: _EVENT_STREAM, **responses(400, 401, 404)},
)
async def follow_task(
    record: OwnedTaskDep,
    hub: HubDep,
    last_event_id: Annotated[
        str | None,
        # documented; another value is a 400 (a client's own bookkeeping error, not a schema's)
        Header(json_schema_extra={"pattern": _ENTRY_ID_PATTERN}),
    ] = None,
) -> EventStream:
    """Server-sent events: every status change, message and model token, ending after the last.

    Reconnect with `Last-Event-ID` to resume after the last event received."""
    if last_event_id is not None and not _ENTRY_ID.fullmatch(last_event_id):
        detail = "Last-Event-ID must be an event id this stream sent (like 1700000000000-0)"
        raise HTTPException(status.HTTP_400_BAD_REQUEST, detail=detail)
    return EventStream(hub.follow(record.id, last_event_id or "0-0", record.terminal))


@router.post(
    "/{task_id}/cancel", response_model=TaskAccepted, responses=responses(401, 404, 409, 413)
)
async def cancel_task(record: OwnedTaskDep, store: StoreDep, celery: CeleryDep) -> TaskAccepted:
    """End a task now. A step in flight is stopped and not applied; the session passes to the
    next task."""
    if not await cancel(store, celery, record, "cancelled by the client"):
        now = await store.get(record.id) or record
        raise HTTPException(status.HTTP_409_CONFLICT, detail=f"task already {now.status}")
    return TaskAccepted(id=record.id, status=TaskStatus.CANCELLED, session_id=record.session_id)
