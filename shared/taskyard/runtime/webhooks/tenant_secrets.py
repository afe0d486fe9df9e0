"""Each tenant's webhook signing secret (``whsec_`` + base64 of 32 random bytes), kept in Redis
and read at ``GET /v1/webhooks/secret``: one tenant cannot forge another's deliveries."""

from __future__ import annotations

import base64
import secrets

from taskyard.plumbing import keys
from taskyard.runtime.store import TaskStore, redis_replies

__all__ = ["tenant_secret"]


async def tenant_secret(store: TaskStore, tenant: str) -> str:
    """The tenant's signing secret, made the first time it is asked for."""
    key = keys.webhook_secret(tenant)
    made = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    await store.r.set(key, made, nx=True)
    return redis_replies.text(await store.r.get(key)) or made
