"""The tenant directory as a pure decision over a request's credential and claims."""

from __future__ import annotations

import pytest

from services.llm_proxy.errors import Forbidden, Unauthorized
from services.llm_proxy.limits.tenants import Caller, Tenant, TenantDirectory, parse_limits
from taskyard.plumbing.tenant_credentials import TenantCredentials

CREDENTIALS = TenantCredentials("0123456789abcdef" * 3)


def _bearer(credential: str) -> bytes:
    return f"Bearer {credential}".encode()


def test_without_keys_or_tokens_the_shared_key_is_the_one_tenant() -> None:
    directory = TenantDirectory("", "shared-key", require_key=True)
    assert directory.authenticate(_bearer("shared-key")) == Caller(Tenant("default"))
    with pytest.raises(Unauthorized):
        directory.authenticate(_bearer("other"))


def test_with_tokens_on_the_shared_key_is_no_tenant() -> None:
    directory = TenantDirectory("", "shared-key", require_key=True, credentials=CREDENTIALS)
    with pytest.raises(Unauthorized):
        directory.authenticate(_bearer("shared-key"))


def test_tokens_take_their_tenants_limits() -> None:
    directory = TenantDirectory("k1:5:0:keyed", "x", True, CREDENTIALS, "a:10:100,*:1:2")
    caller = directory.authenticate(_bearer(CREDENTIALS.sign("a", "t1")), b"t1")
    assert caller == Caller(Tenant("a", 10, 100), "t1")
    assert directory.authenticate(_bearer(CREDENTIALS.sign("b", "t2"))).tenant == Tenant("b", 1, 2)
    assert directory.authenticate(_bearer("k1")) == Caller(Tenant("keyed", 5, 0))


def test_an_optional_key_never_lets_a_bad_token_through_as_anonymous() -> None:
    directory = TenantDirectory("", "x", require_key=False, credentials=CREDENTIALS)
    assert directory.authenticate(_bearer("whatever")).tenant == Tenant("anonymous")
    with pytest.raises(Unauthorized):
        directory.authenticate(_bearer(CREDENTIALS.sign("a", "t")[:-2] + "xx"))


def test_claims_the_credential_does_not_back_are_forbidden() -> None:
    directory = TenantDirectory("k1:0:0:keyed", "x", True, CREDENTIALS)
    token = _bearer(CREDENTIALS.sign("a", "t1"))
    with pytest.raises(Forbidden, match="another task"):
        directory.authenticate(token, b"t2")
    with pytest.raises(Forbidden, match="tenant"):
        directory.authenticate(token, None, b"b")
    with pytest.raises(Forbidden, match="tenant"):
        directory.authenticate(_bearer("k1"), None, b"a")
    assert directory.authenticate(_bearer("k1"), b"any-task", b"keyed").task_id == "any-task"


@pytest.mark.parametrize("spec", ["a:1", "a:x:1", ":1:1", "a:1:2:3"])
def test_malformed_limits_say_the_format(spec: str) -> None:
    with pytest.raises(ValueError, match="tenant:rpm:tpm"):
        parse_limits(spec)
