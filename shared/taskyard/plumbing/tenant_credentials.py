"""Tenant credentials: how a model call proves whose task it serves.

The agent worker signs a short-lived credential for each model call, over the task's
tenant, the task id and an expiry, with a secret only the agent workers and the LLM proxy
hold (`TASKYARD_LLM_TOKEN_SECRET`); it goes to the proxy as the call's bearer credential.
The proxy verifies it and counts and limits the call as that tenant's. Nothing else can
make one: a client of the gateway never sees one, and code in a tool sandbox has neither
the secret (tool workers are not given it) nor a credential (they travel only from the
agent worker to the proxy, which does not pass them upstream). The docs, the settings and
the refusals' messages call it a "tenant token", as the wire and the environment name it.

Shape: ``tyt1.<payload>.<signature>``, both parts unpadded base64url; the payload is JSON
``{"tenant", "task", "exp"}`` and the signature HMAC-SHA256 of ``tyt1.<payload>``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from taskyard.errors import TaskyardError

__all__ = [
    "CredentialError",
    "ExpiredCredential",
    "InvalidCredential",
    "TenantClaim",
    "TenantCredentials",
    "is_tenant_credential",
]

PREFIX = "tyt1."
_TENANT_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"  # as `taskyard.plumbing.settings` allows tenant names


class CredentialError(TaskyardError):
    """A tenant credential that does not hold; the message says why (never the credential)."""


class InvalidCredential(CredentialError):
    """Malformed, or not signed with the secret: forged or from another deployment."""


class ExpiredCredential(CredentialError):
    """Signed with the secret, but past its expiry."""


@dataclass(frozen=True, slots=True)
class TenantClaim:
    """What a valid credential vouches for."""

    tenant: str
    task_id: str
    expires_at: int


class _Payload(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tenant: str = Field(pattern=_TENANT_PATTERN)
    task: str = Field(min_length=1, max_length=128)
    exp: int


def is_tenant_credential(credential: str) -> bool:
    """Whether a bearer credential is meant as a tenant credential (and so must verify)."""
    return credential.startswith(PREFIX)


class TenantCredentials:
    """Signs and verifies tenant credentials with one secret; `clock` is injectable for tests."""

    def __init__(
        self, secret: str, ttl_s: float = 300.0, clock: Callable[[], float] = time.time
    ) -> None:
        if not secret:
            raise ValueError("tenant tokens need a secret")
        self._key = secret.encode()
        self.ttl_s = ttl_s
        self._clock = clock

    def sign(self, tenant: str, task_id: str) -> str:
        """A credential for one call of `task_id`'s, valid for `ttl_s`."""
        exp = int(self._clock() + self.ttl_s)
        payload = _b64(orjson.dumps({"tenant": tenant, "task": task_id, "exp": exp}))
        signed = PREFIX + payload
        return f"{signed}.{_b64(self._mac(signed))}"

    def verify(self, credential: str) -> TenantClaim:
        """The credential's claim; `InvalidCredential` or `ExpiredCredential` otherwise."""
        signed, dot, signature = credential.rpartition(".")
        if not (dot and is_tenant_credential(signed)):
            raise InvalidCredential("malformed tenant token")
        if not hmac.compare_digest(_unb64(signature), self._mac(signed)):
            raise InvalidCredential("tenant token signature does not match")
        try:
            payload = _Payload.model_validate_json(_unb64(signed[len(PREFIX) :]))
        except ValidationError:
            raise InvalidCredential("malformed tenant token payload") from None
        if payload.exp <= self._clock():
            raise ExpiredCredential("tenant token expired")
        return TenantClaim(payload.tenant, payload.task, payload.exp)

    def _mac(self, signed: str) -> bytes:
        return hmac.new(self._key, signed.encode(), hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise InvalidCredential("malformed tenant token") from None
