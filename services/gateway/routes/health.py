"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter

from services.gateway.deps import AsyncRedisDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(r: AsyncRedisDep) -> dict[str, str]:
    await r.ping()
    return {"status": "ready"}
