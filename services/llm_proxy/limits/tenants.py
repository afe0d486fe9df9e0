"""Who a request is from: the tenant its credential proves, with that tenant's budgets.

Two credentials, as `Authorization: Bearer ...`:

- a tenant token (``tyt1.``, `taskyard.plumbing.tenant_credentials`), which the agent workers sign
  for each model call of a task: the proxy verifies it and the call is the token's tenant's, for the
  token's task. Its limits are the tenant's in `TASKYARD_PROXY_TENANT_LIMITS`. A token that
  does not verify is refused (401), never taken as anonymous;
- a plain API key from `TASKYARD_PROXY_KEYS`, for direct use (a client of the proxy itself),
  with the key's own limits.

A request that names a task (`X-Task-ID`) or a tenant (`X-Taskyard-Tenant`) other than its
token's, or a tenant other than its key's, is refused (403): a credential acts for its own
tenant and task only. A tenant's calls count against one budget whichever way they came.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.llm_proxy.errors import Forbidden, Unauthorized
from taskyard.plumbing.tenant_credentials import (
    CredentialError,
    ExpiredCredential,
    TenantCredentials,
    is_tenant_credential,
)

__all__ = ["Caller", "Tenant", "TenantDirectory", "parse_limits"]

ANY_TENANT = "*"


@dataclass(frozen=True, slots=True)
class Tenant:
    """Who a key belongs to; 0 means no limit."""

    name: str
    rpm: int = 0
    tpm: int = 0


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated request: its tenant, and its task when a credential vouches for one."""

    tenant: Tenant
    task_id: str | None = None


class TenantDirectory:
    """Looks up the tenant of a request's credential.

    `keys`: "key", "key:rpm:tpm" or "key:rpm:tpm:tenant", comma-separated. Without keys and
    without `credentials`, `default_key` alone is accepted (tenant "default", no limits).
    `limits`: "tenant:rpm:tpm" comma-separated, "*" for every tenant not named; applied to
    the tenants of tenant credentials.
    """

    def __init__(
        self,
        keys: str,
        default_key: str,
        require_key: bool,
        credentials: TenantCredentials | None = None,
        limits: str = "",
    ) -> None:
        legacy = not keys.strip() and credentials is None
        self._keys = {default_key: Tenant("default")} if legacy else _parse_keys(keys)
        self._require = require_key
        self._anonymous = Tenant("anonymous")
        self._credentials = credentials
        self._limits = parse_limits(limits)
        self._by_name: dict[str, Tenant] = {}

    def authenticate(
        self, authorization: bytes | None, task_id: bytes | None = None,
        tenant: bytes | None = None,
    ) -> Caller:  # fmt: skip
        """The caller; `Unauthorized` (401) for a missing, unknown, forged or expired
        credential, `Forbidden` (403) when the request claims another task or tenant."""
        credential = _bearer(authorization)
        if credential is not None and is_tenant_credential(credential):
            return self._from_credential(credential, task_id, tenant)
        found = self._keys.get(credential) if credential else None
        if found is None and self._require:
            raise Unauthorized("missing or unknown API key")
        named_task = task_id.decode(errors="replace") if task_id else None
        caller = Caller(found or self._anonymous, named_task)
        _check_tenant(caller.tenant, tenant, "this API key")
        return caller

    def _from_credential(
        self, credential: str, task_id: bytes | None, tenant: bytes | None
    ) -> Caller:
        if self._credentials is None:
            raise Unauthorized("tenant tokens are not accepted here (no secret is set)")
        try:
            claim = self._credentials.verify(credential)
        except ExpiredCredential as exc:
            raise Unauthorized(str(exc), code="token_expired") from None
        except CredentialError as exc:
            raise Unauthorized(str(exc)) from None
        if task_id is not None and task_id.decode(errors="replace") != claim.task_id:
            raise Forbidden("the tenant token was issued for another task")
        caller = Caller(self._tenant(claim.tenant), claim.task_id)
        _check_tenant(caller.tenant, tenant, "the tenant token")
        return caller

    def _tenant(self, name: str) -> Tenant:
        found = self._by_name.get(name)
        if found is None:
            rpm, tpm = self._limits.get(name) or self._limits.get(ANY_TENANT) or (0, 0)
            found = self._by_name[name] = Tenant(name, rpm, tpm)
        return found


def _check_tenant(tenant: Tenant, named: bytes | None, credential: str) -> None:
    if named is not None and named.decode(errors="replace") != tenant.name:
        raise Forbidden(f"{credential} does not act for that tenant")


def _bearer(authorization: bytes | None) -> str | None:
    if not authorization or authorization[:7].lower() != b"bearer ":
        return None
    return authorization[7:].strip().decode(errors="replace")


def _parse_keys(spec: str) -> dict[str, Tenant]:
    """ "key", "key:rpm:tpm" or "key:rpm:tpm:name", comma-separated."""
    tenants = {}
    for index, entry in enumerate(e.strip() for e in spec.split(",") if e.strip()):
        key, *rest = entry.split(":")
        rpm = int(rest[0]) if len(rest) > 0 and rest[0] else 0
        tpm = int(rest[1]) if len(rest) > 1 and rest[1] else 0
        name = rest[2] if len(rest) > 2 and rest[2] else f"tenant{index}"
        tenants[key] = Tenant(name, rpm, tpm)
    return tenants


def parse_limits(spec: str) -> dict[str, tuple[int, int]]:
    """ "tenant:rpm:tpm" comma-separated ("*" for the rest) to {tenant: (rpm, tpm)}; a
    `ValueError` says what is wrong."""
    limits = {}
    for number, entry in enumerate((e.strip() for e in spec.split(",") if e.strip()), 1):
        name, *numbers = entry.split(":")
        if not name or len(numbers) != 2 or not all(n.isdigit() for n in numbers):
            raise ValueError(
                f"TASKYARD_PROXY_TENANT_LIMITS: entry {number} is not tenant:rpm:tpm (whole "
                "numbers, 0 for no limit; '*' names every other tenant)"
            )
        limits[name] = (int(numbers[0]), int(numbers[1]))
    return limits
