"""/metrics: the gateway's Prometheus metrics, with the queues' depths read now."""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST

from services.gateway.deps import SystemDep
from services.gateway.metrics import QUEUE_DEPTH, render

router = APIRouter(tags=["metrics"])


@router.get("/metrics", include_in_schema=False)
async def metrics(system: SystemDep) -> Response:
    for queue in await system.queues():
        QUEUE_DEPTH.labels(queue.name).set(queue.depth)
    return Response(render(), media_type=CONTENT_TYPE_LATEST)
