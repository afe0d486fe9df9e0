"""Tenant tokens: a token verifies to what was signed, and only that; anything forged,
tampered with, signed elsewhere or expired is refused with the reason."""

from __future__ import annotations

import base64

import orjson
import pytest

from taskyard.plumbing.tenant_credentials import (
    ExpiredCredential,
    InvalidCredential,
    TenantClaim,
    TenantCredentials,
    is_tenant_credential,
)

SECRET = "0123456789abcdef" * 3


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _tokens(clock: Clock, secret: str = SECRET) -> TenantCredentials:
    return TenantCredentials(secret, ttl_s=60, clock=clock)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_a_token_verifies_to_its_tenant_task_and_expiry() -> None:
    clock = Clock()
    token = _tokens(clock).sign("team-a", "task_1")
    assert is_tenant_credential(token) and not is_tenant_credential("sk-plain-key")
    assert _tokens(clock).verify(token) == TenantClaim("team-a", "task_1", 1_000_060)


def test_a_token_expires() -> None:
    clock = Clock()
    token = _tokens(clock).sign("team-a", "task_1")
    clock.now += 59
    _tokens(clock).verify(token)
    clock.now += 1
    with pytest.raises(ExpiredCredential, match="expired"):
        _tokens(clock).verify(token)


def test_a_token_of_another_secret_is_refused() -> None:
    clock = Clock()
    token = _tokens(clock, "another-deployment-secret-0123456789").sign("team-a", "task_1")
    with pytest.raises(InvalidCredential, match="signature"):
        _tokens(clock).verify(token)


def test_a_claim_cannot_be_changed_under_its_signature() -> None:
    clock = Clock()
    prefix, _, signature = _tokens(clock).sign("team-a", "task_1").rpartition(".")
    forged = {"tenant": "team-b", "task": "task_1", "exp": 1_000_060}
    for payload in (forged, {**forged, "tenant": "team-a", "exp": 9_999_999_999}):
        with pytest.raises(InvalidCredential, match="signature"):
            _tokens(clock).verify(f"tyt1.{_b64(orjson.dumps(payload))}.{signature}")
    assert prefix.startswith("tyt1.")


@pytest.mark.parametrize(
    "token",
    ["tyt1.", "tyt1.abc", "tyt1.a.b.c", "tyt1.!!!.???", "tyt1.é.é", "sk-not-a-token", ""],
)
def test_malformed_tokens_are_refused(token: str) -> None:
    with pytest.raises(InvalidCredential):
        _tokens(Clock()).verify(token)


def test_a_well_signed_payload_of_the_wrong_shape_is_refused() -> None:
    # Only a holder of the secret could make one; still, nothing unchecked gets through.
    clock = Clock()
    tokens = _tokens(clock)
    signed = "tyt1." + _b64(orjson.dumps({"tenant": "a:b", "task": "t", "exp": 2_000_000}))
    token = f"{signed}.{_b64(tokens._mac(signed))}"
    with pytest.raises(InvalidCredential, match="payload"):
        tokens.verify(token)


def test_a_secret_is_required() -> None:
    with pytest.raises(ValueError, match="secret"):
        TenantCredentials("")
