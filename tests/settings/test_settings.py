"""Settings that parse a text format refuse a bad value at start-up, saying which variable and
what the format is, and never repeating a secret."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from services.llm_proxy.settings import ProxySettings
from shared.settings import Settings


def _error(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> str:
    """The error of whichever settings class reads `name`: the shared one or the proxy's."""
    monkeypatch.setenv(name, value)
    for settings_class in (Settings, ProxySettings):
        try:
            settings_class()
        except ValidationError as error:
            return str(error)
    raise AssertionError(f"{name}={value!r} was accepted")


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("TASKYARD_API_KEYS", "justakey", "key=tenant pairs separated by commas"),
        ("TASKYARD_API_KEYS", "k1=a,=b", "pair 2 is not key=tenant"),
        ("TASKYARD_API_KEYS", " , ", "names none"),
        ("TASKYARD_API_KEYS", "k1=team:a", "letters, digits"),  # ':' would join Redis keys
        ("TASKYARD_API_KEYS", "k1=a,k1=b", "repeats a key"),
        ("TASKYARD_API_KEYS", "changeme=a", "placeholder"),
        ("TASKYARD_REDIS_URL", "127.0.0.1:6379", "TASKYARD_REDIS_URL needs a URL starting with redis://"),
        ("TASKYARD_BROKER_URL", "nowhere", "TASKYARD_BROKER_URL needs a URL"),
        ("TASKYARD_LLM_BASE_URL", "127.0.0.1:8400/v1", "LLM_BASE_URL needs a URL starting with"),
        ("TASKYARD_SEARCH_URL", "http://", "TASKYARD_SEARCH_URL needs a URL"),
        ("TASKYARD_PROXY_UPSTREAMS", "10.0.0.5:8000/v1", "url or model=url"),
        ("TASKYARD_PROXY_UPSTREAMS", "=http://a:1/v1", "no model before its '='"),
        ("TASKYARD_PLUGIN_MODULES", "my-pkg", "'my-pkg' is not a module name"),
        ("TASKYARD_SANDBOX_MEMORY", "256MB", "TASKYARD_SANDBOX_MEMORY must be a number of bytes"),
        ("TASKYARD_SANDBOX_DISK", "lots", "TASKYARD_SANDBOX_DISK must be a number of bytes"),
        ("TASKYARD_PROXY_KEYS", "sk-1:many:0", "key, key:rpm:tpm or key:rpm:tpm:tenant"),
        ("TASKYARD_PROXY_FALLBACKS", "big", "model=fallback|fallback entries"),
        ("TASKYARD_LLM_TOKEN_SECRET", "too-short", "at least 32 characters"),
        ("TASKYARD_LLM_TOKEN_SECRET", "changeme", "not a placeholder"),
        ("TASKYARD_PROXY_TENANT_LIMITS", "team-a:60", "entry 1 is not tenant:rpm:tpm"),
        ("TASKYARD_PROXY_FALLBACKS", "big=small|", "model=fallback|fallback entries"),
    ],
)  # fmt: skip
def test_a_malformed_value_says_what_the_format_is(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, says: str
) -> None:
    assert says in _error(monkeypatch, name, value)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("TASKYARD_API_KEYS", "sk-secret-1"),
        ("TASKYARD_API_KEYS", "sk-secret-1=a,sk-secret-1=b"),
        ("TASKYARD_REDIS_URL", "localhost:6379?password=sk-secret-1"),
        ("TASKYARD_PROXY_KEYS", "sk-secret-1:x"),
        ("TASKYARD_LLM_TOKEN_SECRET", "sk-secret-1"),
    ],
)
def test_errors_never_repeat_a_secret(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    assert "sk-secret" not in _error(monkeypatch, name, value)


def test_well_formed_values_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASKYARD_API_KEYS", " k1 = team-a , k2=team.b ")
    monkeypatch.setenv("TASKYARD_PROXY_UPSTREAMS", "http://a:1/v1, big=https://b/v1")
    monkeypatch.setenv("TASKYARD_REDIS_URL", "unix:///run/redis.sock")
    monkeypatch.setenv("TASKYARD_SANDBOX_MEMORY", "1g")
    monkeypatch.setenv("TASKYARD_PLUGIN_MODULES", "examples.custom_agent, examples.custom_action")
    settings = Settings()
    assert settings.tenants_by_key() == {"k1": "team-a", "k2": "team.b"}
    assert settings.sandbox_memory == "1g"
    proxy = ProxySettings()
    assert proxy.proxy_upstreams == "http://a:1/v1, big=https://b/v1"
    assert proxy.redis_url == "unix:///run/redis.sock"
