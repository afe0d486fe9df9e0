"""/v1/sessions: the tenant's sessions; what one holds, forking it, and forgetting it."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query, Response, status

from services.gateway.deps import CeleryDep, SettingsDep, StoreDep, TenantDep
from services.gateway.errors import fork_refused, responses
from services.gateway.json_route import JSONRoute
from services.gateway.resources.sessions.models import (
    Interpreter,
    SessionFork,
    SessionForked,
    SessionList,
    SessionPublic,
    SessionSummary,
)
from taskyard.plumbing import keys
from taskyard.runtime.cancel import announce_forgotten, cancel
from taskyard.runtime.forks import ForkRefused, fork_session
from taskyard.runtime.store import pages, sessions
from taskyard.runtime.store.pages import SESSION_CURSOR_PATTERN
from taskyard.runtime.task import SESSION_ID_PATTERN

router = APIRouter(prefix="/v1/sessions", tags=["sessions"], route_class=JSONRoute)

SessionIdPath = Annotated[str, Path(pattern=SESSION_ID_PATTERN)]
# A memory's `state_dict` key: the top agent's, or a sub-agent's (``critics.0.memory``).
MemoryPath = Annotated[str, Query(pattern=r"^([A-Za-z0-9_-]{1,64}\.){0,16}memory$")]


@router.get("", response_model=SessionList, responses=responses(401, 422))
async def list_sessions(
    tenant: TenantDep,
    store: StoreDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(pattern=SESSION_CURSOR_PATTERN)] = None,
) -> SessionList:
    """The tenant's sessions, the most recently used (by their latest task) first, a page at a
    time (`cursor` from the last page). A deleted session is listed again with its next task."""
    page = await pages.list_sessions(store, tenant, limit, cursor)
    found = await sessions.overviews(store, tenant, page.sessions)
    return SessionList(sessions=[SessionSummary.of(o) for o in found], next_cursor=page.next_cursor)


@router.get("/{session_id}", response_model=SessionPublic, responses=responses(401, 404, 422))
async def get_session(
    session_id: SessionIdPath,
    tenant: TenantDep,
    store: StoreDep,
    offset: Annotated[int, Query(ge=0, le=2**31)] = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    memory: MemoryPath = "memory",
) -> SessionPublic:
    """A page of the session's messages (`offset`, `limit`; of a sub-agent's memory with
    `memory=writer.memory`), its memories and values, its latest tasks, the task running
    and those waiting, and its interpreter as its tool worker last reported it."""
    state = await sessions.session_state(store, tenant, session_id, offset, limit, path=memory)
    if not state.exists:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="no such session")
    interpreter = Interpreter(**state.interpreter) if state.interpreter else None
    return SessionPublic(
        id=session_id, messages=state.messages, total_messages=state.total_messages,
        memories=state.memories, values=state.values, tasks=state.task_ids,
        running=state.running, waiting=state.waiting, interpreter=interpreter,
        forked_from=state.forked_from,
    )  # fmt: skip


@router.post(
    "/{session_id}/fork", status_code=status.HTTP_201_CREATED, response_model=SessionForked,
    responses=responses(
        401, 404, 409, 413, 422, 503, 504,
        why={404: "No such session for this API key.",
             409: "A task runs in the session (or waits for it), a cell runs in its "
             "interpreter, or the new id is a session already.",
             503: "Redis does not answer, or the session's interpreter cannot be forked on "
             "this sandbox backend (the reason says).",
             504: "The tool worker holding the session's interpreter did not answer in time "
             "(TASKYARD_GATEWAY_FORK_TIMEOUT_S)."},
    ),
)  # fmt: skip
async def fork(
    session_id: SessionIdPath,
    tenant: TenantDep,
    store: StoreDep,
    celery: CeleryDep,
    settings: SettingsDep,
    body: SessionFork | None = None,
) -> SessionForked:
    """Fork the session: a new session (`session_id` in the body, or a new id) with a copy of
    its memory and, if a tool worker holds its interpreter, a live copy of that interpreter
    (variables, imports, open files, its working directory), made copy-on-write on that
    worker. Neither sees the other's later changes. While a task runs in the session or
    waits for it: 409."""
    new_id = (body.session_id if body else None) or uuid.uuid4().hex
    timeout_s = settings.gateway_fork_timeout_s
    try:
        forked = await fork_session(store, celery, tenant, session_id, new_id, timeout_s)
    except ForkRefused as refused:
        raise fork_refused(refused) from refused
    return SessionForked.of(forked)


@router.delete(
    "/{session_id}", status_code=status.HTTP_204_NO_CONTENT,
    responses=responses(401, 404, 409, 422),
)  # fmt: skip
async def delete_session(
    session_id: SessionIdPath,
    tenant: TenantDep,
    store: StoreDep,
    celery: CeleryDep,
    force: bool = False,
) -> Response:
    """Forget the session: its memory, its interpreter, its tool state, its list of tasks (the
    tasks themselves stay, by id and in `GET /v1/tasks`); it answers 404 until a task names it
    again. While a task runs in it: 409, unless `force=true`, which cancels it and those
    waiting."""
    state = await sessions.session_state(store, tenant, session_id, 0, 1)
    if not state.exists:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="no such session")
    if state.running and not force:
        detail = f"task {state.running} runs in this session; pass force=true to cancel it"
        raise HTTPException(status.HTTP_409_CONFLICT, detail=detail)
    for task_id in [*state.waiting, *([state.running] if state.running else [])]:
        record = await store.get(task_id)
        if record is not None:
            await cancel(store, celery, record, "cancelled: its session was deleted")
    await sessions.forget_session(store, tenant, session_id)
    await announce_forgotten(store.r, keys.session_key(tenant, session_id))
    return Response(status_code=status.HTTP_204_NO_CONTENT)
