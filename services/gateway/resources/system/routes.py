"""/v1/system: what runs the tasks, for the dashboard (queues, workers, model replicas)."""

from __future__ import annotations

from fastapi import APIRouter

from services.gateway.deps import SystemDep, TenantDep
from services.gateway.errors import responses
from services.gateway.resources.system.models import SystemView

router = APIRouter(prefix="/v1/system", tags=["system"])


@router.get("", response_model=SystemView, responses=responses(401))
async def system_view(system: SystemDep, _: TenantDep) -> SystemView:
    """The queues' depths, the workers that answer a ping now, the proxy's replicas."""
    return await system.view()
