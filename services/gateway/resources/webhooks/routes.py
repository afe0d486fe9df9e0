"""/v1/webhooks: what a tenant needs to check its task webhooks' deliveries."""

from __future__ import annotations

from fastapi import APIRouter

from services.gateway.deps import StoreDep, TenantDep
from services.gateway.errors import responses
from services.gateway.json_route import JSONRoute
from services.gateway.resources.webhooks.models import WebhookSecret
from taskyard.runtime.webhooks import tenant_secret

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"], route_class=JSONRoute)


@router.get("/secret", response_model=WebhookSecret, responses=responses(401))
async def get_secret(tenant: TenantDep, store: StoreDep) -> WebhookSecret:
    """The secret the tenant's webhook deliveries are signed with (made on first use)."""
    return WebhookSecret(secret=await tenant_secret(store, tenant))
