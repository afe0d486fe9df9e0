"""Typed dependencies, defined once: settings, store, event hub, task queue, tenant, and the
caller's task named in the path."""

from __future__ import annotations

import re
from functools import cache
from typing import Annotated

import redis.asyncio as aioredis
from celery import Celery
from fastapi import Depends, HTTPException, Path, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from services.gateway.event_hub import EventHub, reader_client
from services.gateway.system import SystemProbe
from shared.celery_app import make_celery
from shared.settings import Settings
from shared.store import TaskStore
from shared.task import TASK_ID_PATTERN, TaskRecord

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


# Every dependency here is `async def`: FastAPI runs a plain `def` one on its thread pool,
# a thread hop per request for what is a dictionary lookup.


async def app_settings(request: Request) -> Settings:
    """The settings the app was made with (`create_app`)."""
    return request.app.state.settings


SettingsDep = Annotated[Settings, Depends(app_settings)]
CLIENT_NAME = "taskyard-gateway"  # its Redis connections, as CLIENT LIST names them


@cache
def _celery(settings: Settings) -> Celery:
    return make_celery(settings)


async def get_celery(settings: SettingsDep) -> Celery:
    return _celery(settings)


async def get_store(request: Request, settings: SettingsDep) -> TaskStore:
    """The app's store (its async clients live on the app's event loop; the lifespan closes
    them)."""
    stores: dict[str, TaskStore] = request.app.state.stores
    if settings.redis_url not in stores:
        stores[settings.redis_url] = TaskStore.from_url(
            settings.redis_url, settings.broker_url, settings.redis_max_connections, CLIENT_NAME,
            outage_retries=4,  # a person waits: a second or so, then 5xx
        )  # fmt: skip
    return stores[settings.redis_url]


async def get_hub(
    request: Request, settings: SettingsDep, store: Annotated[TaskStore, Depends(get_store)]
) -> EventHub:
    """The app's one reader of event streams."""
    hubs: dict[str, EventHub] = request.app.state.hubs
    if settings.redis_url not in hubs:
        hubs[settings.redis_url] = EventHub(reader_client(settings.redis_url, CLIENT_NAME), store.r)
    return hubs[settings.redis_url]


async def get_system(
    request: Request, settings: SettingsDep, celery: Annotated[Celery, Depends(get_celery)]
) -> SystemProbe:
    """The app's view of the queues, workers and replicas (the lifespan closes it)."""
    if request.app.state.system is None:
        broker = aioredis.Redis.from_url(settings.broker_url, client_name=CLIENT_NAME)
        request.app.state.system = SystemProbe(broker, celery, settings.llm_base_url)
    return request.app.state.system


_bearer = HTTPBearer(auto_error=False)  # declares the scheme in the OpenAPI document


async def get_tenant(
    request: Request, _: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> str:
    """The tenant owning the request's API key, which the `Guard` checked before the body."""
    return request.state.tenant


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
