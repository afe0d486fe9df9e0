"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, status
from redis.exceptions import RedisError

from services.gateway.deps import StoreDep
from services.gateway.errors import responses

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", responses=responses(503))
async def readyz(store: StoreDep) -> dict[str, str]:
    """Ready while Redis answers."""
    try:
        await store.r.ping()
    except RedisError as exc:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE, detail="Redis unreachable"
        ) from exc
    return {"status": "ready"}
