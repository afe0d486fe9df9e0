"""API keys to tenants, each with its request and token budgets per minute."""

from __future__ import annotations

from dataclasses import dataclass

from services.llm_proxy.errors import Unauthorized

__all__ = ["Tenant", "TenantDirectory"]


@dataclass(frozen=True, slots=True)
class Tenant:
    """Who a key belongs to; 0 means no limit."""

    name: str
    rpm: int = 0
    tpm: int = 0


class TenantDirectory:
    """Looks up the tenant of a request's `Authorization: Bearer` key."""

    def __init__(self, spec: str, default_key: str, require_key: bool) -> None:
        self._tenants = _parse(spec) if spec.strip() else {default_key: Tenant("default")}
        self._require = require_key
        self._anonymous = Tenant("anonymous")

    def authenticate(self, authorization: bytes | None) -> Tenant:
        """The tenant for the header value; raises `Unauthorized` when a key is required."""
        key = _bearer(authorization)
        tenant = self._tenants.get(key) if key else None
        if tenant is not None:
            return tenant
        if self._require:
            raise Unauthorized("missing or unknown API key")
        return self._anonymous


def _bearer(authorization: bytes | None) -> str | None:
    if not authorization or authorization[:7].lower() != b"bearer ":
        return None
    return authorization[7:].strip().decode(errors="replace")


def _parse(spec: str) -> dict[str, Tenant]:
    """ "key", "key:rpm:tpm" or "key:rpm:tpm:name", comma-separated."""
    tenants = {}
    for index, entry in enumerate(e.strip() for e in spec.split(",") if e.strip()):
        key, *rest = entry.split(":")
        rpm = int(rest[0]) if len(rest) > 0 and rest[0] else 0
        tpm = int(rest[1]) if len(rest) > 1 and rest[1] else 0
        name = rest[2] if len(rest) > 2 and rest[2] else f"tenant{index}"
        tenants[key] = Tenant(name, rpm, tpm)
    return tenants
