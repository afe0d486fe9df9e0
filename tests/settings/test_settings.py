"""Settings that parse a text format refuse a bad value at start-up, saying which variable and
what the format is, and never repeating a secret."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from scripts.settings_table import SERVICES
from services.llm_proxy.settings import ProxySettings
from taskyard.plumbing.celery_app import make_celery
from taskyard.plumbing.settings import AgentWorkerSettings, GatewaySettings, ToolWorkerSettings


def _error(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> str:
    """The error of whichever service's settings class reads `name`."""
    monkeypatch.setenv(name, value)
    for settings_class in SERVICES.values():
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
        ("TASKYARD_REDIS_SENTINELS", "10.0.0.1", "entry 1 ('10.0.0.1') is not host:port"),
        ("TASKYARD_REDIS_SENTINELS", "a:26379,b:x", "entry 2 ('b:x') is not host:port"),
        ("TASKYARD_REDIS_SENTINELS", "a:70000", "must be host:port entries separated by commas"),
        ("TASKYARD_REDIS_SENTINELS", "a:26379", "TASKYARD_REDIS_MASTER go together"),
        ("TASKYARD_REDIS_MASTER", "mymaster", "TASKYARD_REDIS_MASTER go together"),
        ("TASKYARD_MCP_CREDENTIALS", "acme=tok", "MCP_CREDENTIALS must be JSON"),
        ("TASKYARD_MCP_CREDENTIALS", '{"acme": "tok"}', "tenant 'acme' maps to no object"),
        ("TASKYARD_MCP_CREDENTIALS", '{"acme": {"k": 1}}', "'acme'/'k' is not a non-empty string"),
        ("TASKYARD_MCP_ALLOW_NETWORKS", "10.0.0.0/33", "not a valid IPv4 or IPv6 network"),
        ("TASKYARD_TASK_MAX_DEADLINES", "batch:60", "MAX_DEADLINES must be tenant=seconds pairs"),
        ("TASKYARD_TASK_MAX_DEADLINES", "a=60,b=0", "pair 2 is not tenant=seconds (seconds over"),
        ("TASKYARD_TASK_MAX_DEADLINES", "a=nan", "pair 1 is not tenant=seconds"),
        ("TASKYARD_TASK_MAX_DEADLINES", "team:a=60", "pair 1 is not tenant=seconds"),
        ("TASKYARD_TASK_MAX_DEADLINES", "a=60,a=90", "pair 2 repeats tenant 'a'"),
        ("TASKYARD_TASK_MAX_DEADLINE_S", "0", "greater than 0"),
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
        ("TASKYARD_MCP_CREDENTIALS", "sk-secret-1"),
        ("TASKYARD_MCP_CREDENTIALS", '{"acme": ["sk-secret-1"]}'),
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
    monkeypatch.setenv("TASKYARD_MCP_CREDENTIALS", '{"acme": {"weather-key": " tok-1 "}}')
    monkeypatch.setenv("TASKYARD_MCP_ALLOW_NETWORKS", "127.0.0.1/32, 10.20.0.0/16")
    tools = ToolWorkerSettings()
    assert tools.mcp_credential("acme", "weather-key") == "tok-1"
    assert tools.mcp_credential("other", "weather-key") is None
    assert [str(n) for n in tools.mcp_allow_networks] == ["127.0.0.1/32", "10.20.0.0/16"]
    assert tools.sandbox_memory == "1g"
    assert GatewaySettings().tenants_by_key() == {"k1": "team-a", "k2": "team.b"}
    monkeypatch.setenv("TASKYARD_TASK_MAX_DEADLINES", " batch = 86400 , lookup=60.5 ")
    deadlines = AgentWorkerSettings(task_max_deadline_s=900)
    assert [deadlines.max_deadline_s(t) for t in ("batch", "lookup", "other")] == [86400, 60.5, 900]
    proxy = ProxySettings()
    assert proxy.proxy_upstreams == "http://a:1/v1, big=https://b/v1"
    assert proxy.redis_url == "unix:///run/redis.sock"


_SENTINELS = {"TASKYARD_REDIS_SENTINELS": "10.0.0.1:26379, [fd00::2]:26380",
              "TASKYARD_REDIS_MASTER": "mymaster"}  # fmt: skip


def test_sentinels_name_the_server_and_the_urls_give_databases_and_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The URLs' hosts are not used (the broker may name another host than the store); their
    database numbers and password are, Celery's included."""
    for name, value in _SENTINELS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TASKYARD_REDIS_URL", "redis://:s%40crat@ignored:6379/4")
    monkeypatch.setenv("TASKYARD_BROKER_URL", "redis://:s%40crat@elsewhere:6379/5")
    settings = AgentWorkerSettings()
    spec = settings.sentinel
    assert spec is not None
    assert spec.addresses == (("10.0.0.1", 26379), ("fd00::2", 26380))
    assert spec.master == "mymaster"
    assert settings.result_backend == "redis://:s%40crat@ignored:6379/2"  # beside the store
    conf = make_celery(settings).conf
    assert conf.broker_url == (
        "sentinel://:s%40crat@10.0.0.1:26379/5;sentinel://:s%40crat@[fd00::2]:26380/5"
    )
    assert conf.result_backend.endswith("@[fd00::2]:26380/2")
    assert conf.broker_transport == "taskyard.plumbing.broker:SentinelTransport"
    assert conf.broker_transport_options["master_name"] == "mymaster"
    assert conf.result_backend_transport_options["master_name"] == "mymaster"
    assert ProxySettings().sentinel == spec


def test_without_sentinels_celery_keeps_the_plain_urls() -> None:
    settings = ToolWorkerSettings(redis_url="redis://r:6379/0")
    assert settings.sentinel is None
    conf = make_celery(settings).conf
    assert (conf.broker_url, conf.broker_transport) == (
        "redis://r:6379/0",  # the store's own database: a commit pushes with no SELECT
        "taskyard.plumbing.broker:Transport",
    )


@pytest.mark.parametrize("name", ["TASKYARD_REDIS_URL", "TASKYARD_RESULT_BACKEND"])
@pytest.mark.parametrize("url", ["unix:///run/redis.sock?db=0", "rediss://r:6380/0"])
def test_under_sentinels_a_url_must_be_redis(
    monkeypatch: pytest.MonkeyPatch, name: str, url: str
) -> None:
    for setting, value in _SENTINELS.items():
        monkeypatch.setenv(setting, value)
    assert f"{name} must be a redis:// URL when TASKYARD_REDIS_SENTINELS is set" in _error(
        monkeypatch, name, url
    )


def test_a_202_waits_for_one_replica_under_sentinels_unless_told(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert GatewaySettings().accept_replicas == 0  # one Redis: its AOF is the promise
    for name, value in _SENTINELS.items():
        monkeypatch.setenv(name, value)
    assert GatewaySettings().accept_replicas == 1
    monkeypatch.setenv("TASKYARD_GATEWAY_ACCEPT_REPLICAS", "0")
    assert GatewaySettings().accept_replicas == 0
