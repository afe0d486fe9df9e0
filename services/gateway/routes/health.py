"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter

from services.gateway.deps import StoreDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(store: StoreDep) -> dict[str, str]:
    await store.r.ping()
    return {"status": "ready"}
