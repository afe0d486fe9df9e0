"""Typed dependencies, defined once: settings, store, task queue, tenant."""

from __future__ import annotations

from functools import cache
from typing import Annotated

import redis.asyncio as aioredis
from celery import Celery
from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from shared.celery_app import make_celery
from shared.settings import Settings, get_settings
from shared.store import TaskStore

__all__ = ["AsyncRedisDep", "CeleryDep", "SettingsDep", "StoreDep", "TenantDep"]

SettingsDep = Annotated[Settings, Depends(get_settings)]


@cache
def _store(url: str) -> TaskStore:
    return TaskStore.from_url(url)


@cache
def _celery(settings: Settings) -> Celery:
    return make_celery(settings)


def get_store(settings: SettingsDep) -> TaskStore:
    return _store(settings.redis_url)


def get_celery(settings: SettingsDep) -> Celery:
    return _celery(settings)


def get_async_redis(request: Request, settings: SettingsDep) -> aioredis.Redis:
    """The app's async client (bound to its event loop; the lifespan closes it)."""
    clients: dict[str, aioredis.Redis] = request.app.state.redis_clients
    if settings.redis_url not in clients:
        # Event streams block on XREAD for 15 s; redis-py's default 5 s read timeout cuts them.
        clients[settings.redis_url] = aioredis.Redis.from_url(
            settings.redis_url, decode_responses=True, socket_timeout=60
        )
    return clients[settings.redis_url]


_bearer = HTTPBearer(auto_error=False)


def get_tenant(
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
CeleryDep = Annotated[Celery, Depends(get_celery)]
AsyncRedisDep = Annotated[aioredis.Redis, Depends(get_async_redis)]
TenantDep = Annotated[str, Depends(get_tenant)]
