"""Typed dependencies, defined once: settings, store, event hub, task queue, tenant, and the
caller's task named in the path."""

from __future__ import annotations

import re
from functools import cache
from typing import Annotated

from celery import Celery
from fastapi import Depends, HTTPException, Path, Request, status

from services.gateway.event_hub import EventHub, reader_client
from services.gateway.resources.system.probe import SystemProbe
from taskyard.plumbing.celery_app import make_celery
from taskyard.plumbing.keys import TASK_ID_PATTERN
from taskyard.plumbing.redis_clients import async_client
from taskyard.plumbing.settings import GatewaySettings
from taskyard.runtime.store import TaskStore
from taskyard.runtime.task import TaskRecord

__all__ = [
    "CeleryDep",
    "HubDep",
    "OwnedTaskDep",
    "SettingsDep",
    "StoreDep",
    "SystemDep",
    "TenantDep",
    "app_settings",
]


# Every dependency here is `async def` (FastAPI runs a plain `def` one on its thread pool, a
# thread hop per request for what is an attribute lookup) and takes the request alone: each
# dependency of a dependency is one more level FastAPI solves per request. Starlette's `State`
# is untyped: each value is named with the type `create_app` and its lifespan give it.


async def app_settings(request: Request) -> GatewaySettings:
    """The settings the app was made with (`create_app`)."""
    settings: GatewaySettings = request.app.state.settings
    return settings


SettingsDep = Annotated[GatewaySettings, Depends(app_settings)]
CLIENT_NAME = "taskyard-gateway"  # its Redis connections, as CLIENT LIST names them


@cache
def _celery(settings: GatewaySettings) -> Celery:
    return make_celery(settings)


async def get_celery(request: Request) -> Celery:
    return _celery(request.app.state.settings)


async def get_store(request: Request) -> TaskStore:
    """The app's store, made on first use (its async clients live on the app's event loop;
    the lifespan closes them)."""
    state = request.app.state
    if state.store is None:
        # A person waits: a second or so, then 5xx.
        state.store = TaskStore.from_settings(state.settings, CLIENT_NAME, outage_retries=4)
    store: TaskStore = state.store
    return store


async def get_hub(request: Request) -> EventHub:
    """The app's one reader of event streams."""
    state = request.app.state
    if state.hub is None:
        reader = reader_client(state.settings, CLIENT_NAME)
        keep_alive_s = state.settings.gateway_sse_keep_alive_s
        state.hub = EventHub(reader, (await get_store(request)).r, keep_alive_s)
    hub: EventHub = state.hub
    return hub


async def get_system(request: Request) -> SystemProbe:
    """The app's view of the queues, workers and replicas (the lifespan closes it)."""
    state = request.app.state
    if state.system is None:
        settings: GatewaySettings = state.settings
        broker = async_client(settings.broker_url, settings.sentinel, client_name=CLIENT_NAME)
        state.system = SystemProbe(broker, _celery(settings), settings.llm_base_url)
    system: SystemProbe = state.system
    return system


async def get_tenant(request: Request) -> str:
    """The tenant owning the request's API key, which the `Admission` checked before the body
    (`openapi.py` documents the scheme)."""
    tenant: str = request.state.tenant
    return tenant


StoreDep = Annotated[TaskStore, Depends(get_store)]
HubDep = Annotated[EventHub, Depends(get_hub)]
CeleryDep = Annotated[Celery, Depends(get_celery)]
TenantDep = Annotated[str, Depends(get_tenant)]
SystemDep = Annotated[SystemProbe, Depends(get_system)]

_TASK_ID = re.compile(TASK_ID_PATTERN)
_TaskIdPath = Path(
    description="A task's id, as `POST /v1/tasks` answered it.",
    json_schema_extra={"pattern": TASK_ID_PATTERN},  # documented; anything else is a 404
)


async def get_owned_task(
    task_id: Annotated[str, _TaskIdPath], tenant: TenantDep, store: StoreDep
) -> TaskRecord:
    """The caller's task `task_id`. Anything else is the same 404: an id of another shape
    (which never reaches Redis), an unknown id, another tenant's task."""
    record = await store.get(task_id) if _TASK_ID.fullmatch(task_id) else None
    if record is None or record.tenant != tenant:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="no such task")
    return record


OwnedTaskDep = Annotated[TaskRecord, Depends(get_owned_task)]
