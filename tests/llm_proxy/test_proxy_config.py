"""The pool description, from the environment's upstream list or a YAML file."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.llm_proxy.replicas.spec import ANY_MODEL, load_pool
from services.llm_proxy.settings import ProxySettings
from taskyard.plumbing.settings import BrokerSettings


def test_upstreams_name_models_or_serve_any() -> None:
    settings = ProxySettings(
        proxy_upstreams="http://10.0.0.1:8000/v1, big=https://10.0.0.2/v1",
        proxy_fallbacks="big=small|tiny",
        proxy_max_in_flight=7,
    )
    pool = load_pool(settings)
    bare, big = pool.replicas
    assert (bare.model, bare.host, bare.port, bare.base_path, bare.tls) == (
        ANY_MODEL,
        "10.0.0.1",
        8000,
        "/v1",
        False,
    )
    assert (big.model, big.port, big.tls, big.max_in_flight) == ("big", 443, True, 7)
    assert pool.fallbacks == {"big": ("small", "tiny")}


def test_a_yaml_pool_wins_over_the_upstream_list(tmp_path: Path) -> None:
    path = tmp_path / "pool.yaml"
    path.write_text(
        "replicas:\n"
        "  - {url: 'http://a:1/v1', model: m, weight: 3, max_in_flight: 2, api_key: k}\n"
        "  - {url: 'http://b:2/v1'}\n"
        "fallbacks: {m: n}\n"
    )
    pool = load_pool(ProxySettings(proxy_pool_file=str(path), proxy_max_in_flight=9))
    first, second = pool.replicas
    assert (first.weight, first.max_in_flight, first.api_key) == (3.0, 2, "k")
    assert (second.model, second.max_in_flight) == (ANY_MODEL, 9)
    assert pool.fallbacks == {"m": ("n",)}


def test_settings_come_from_the_taskyard_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASKYARD_PROXY_POLICY", "round_robin")
    monkeypatch.setenv("TASKYARD_PROXY_MAX_RETRIES", "5")
    settings = ProxySettings()
    assert (settings.proxy_policy, settings.proxy_max_retries) == ("round_robin", 5)


def test_an_unknown_policy_is_refused_at_start_up() -> None:
    with pytest.raises(ValueError, match="proxy_policy"):
        ProxySettings(proxy_policy="random")  # type: ignore[arg-type]


def test_the_settings_are_the_proxys_own_under_the_shared_variable_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TASKYARD_REDIS_URL", "redis://10.0.0.9:6379/3")
    monkeypatch.setenv("TASKYARD_LLM_API_KEY", "sk-direct")
    monkeypatch.setenv("TASKYARD_PROXY_MAX_RETRIES", "5")
    settings = ProxySettings()
    assert (settings.redis_url, settings.llm_api_key) == ("redis://10.0.0.9:6379/3", "sk-direct")
    assert settings.proxy_max_retries == 5
    assert not isinstance(settings, BrokerSettings)
    assert not set(ProxySettings.model_fields) & {"api_keys", "broker_url", "sandbox_image"}


def test_placement_sharing_is_set_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASKYARD_PROXY_PLACEMENT_SYNC_S", "0.2")
    monkeypatch.setenv("TASKYARD_PROXY_PLACEMENT_TTL_S", "3")
    monkeypatch.setenv("TASKYARD_PROXY_SHARE_PLACEMENTS", "false")
    settings = ProxySettings()
    assert (settings.proxy_placement_sync_s, settings.proxy_placement_ttl_s) == (0.2, 3.0)
    assert not settings.proxy_share_placements


def test_a_placement_ttl_under_two_sync_intervals_is_refused() -> None:
    # Live instances would drop out of each other's load between two of their syncs.
    with pytest.raises(ValueError, match="PLACEMENT_TTL_S must be at least twice"):
        ProxySettings(proxy_placement_sync_s=1.0, proxy_placement_ttl_s=1.5)
