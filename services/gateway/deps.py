"""Typed dependencies, defined once: settings, store, event hub, task queue, tenant."""

from __future__ import annotations

from functools import cache
from typing import Annotated

import redis.asyncio as aioredis
from celery import Celery
from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from services.gateway.event_hub import HUB_READ_TIMEOUT_S, EventHub
from shared.celery_app import make_celery
from shared.settings import Settings, get_settings
from shared.store import TaskStore

__all__ = ["CeleryDep", "HubDep", "SettingsDep", "StoreDep", "TenantDep", "app_settings"]


# Every dependency here is `async def`: FastAPI runs a plain `def` one on its thread pool,
# a thread hop per request for what is a dictionary lookup.


async def app_settings() -> Settings:
    """The settings (tests override this dependency)."""
    return get_settings()


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
            settings.redis_url, settings.broker_url, settings.redis_max_connections, CLIENT_NAME
        )
    return stores[settings.redis_url]


async def get_hub(
    request: Request, settings: SettingsDep, store: Annotated[TaskStore, Depends(get_store)]
) -> EventHub:
    """The app's one reader of event streams."""
    hubs: dict[str, EventHub] = request.app.state.hubs
    if settings.redis_url not in hubs:
        # A connection of its own, with a read timeout past its XREAD's block.
        reader = aioredis.Redis.from_url(
            settings.redis_url, decode_responses=True, socket_timeout=HUB_READ_TIMEOUT_S,
            client_name=CLIENT_NAME,
        )  # fmt: skip
        hubs[settings.redis_url] = EventHub(reader, store.r)
    return hubs[settings.redis_url]


_bearer = HTTPBearer(auto_error=False)


async def get_tenant(
    settings: SettingsDep,
    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    """The tenant owning the API key; 401 without a valid `Authorization: Bearer` key."""
    tenant = settings.tenants_by_key().get(creds.credentials) if creds else None
    if tenant is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            detail="missing or invalid API key (Authorization: Bearer <key>)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return tenant


StoreDep = Annotated[TaskStore, Depends(get_store)]
HubDep = Annotated[EventHub, Depends(get_hub)]
CeleryDep = Annotated[Celery, Depends(get_celery)]
TenantDep = Annotated[str, Depends(get_tenant)]
