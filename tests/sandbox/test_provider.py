"""The package surface and the backend registry."""

from __future__ import annotations

import pytest

import shared.sandbox
from shared.sandbox import (
    BACKENDS,
    DockerSandboxProvider,
    LocalSandboxProvider,
    make_sandbox_provider,
)
from shared.settings import Settings


def test_public_surface_is_declared() -> None:
    for name in shared.sandbox.__all__:
        assert hasattr(shared.sandbox, name), name


def test_registry_maps_backend_names() -> None:
    assert dict(BACKENDS) == {"docker": DockerSandboxProvider, "local": LocalSandboxProvider}


def test_factory_builds_the_configured_backend() -> None:
    provider = make_sandbox_provider(Settings(sandbox_backend="local", sandbox_warm_pool=0))
    try:
        assert isinstance(provider, LocalSandboxProvider)
        assert provider.get("a:b").run("21 * 2", 20).result == "42"
    finally:
        provider.close_all()


def test_factory_refuses_unknown_backends() -> None:
    with pytest.raises(ValueError, match="unknown sandbox_backend 'vm'; known: docker, local"):
        make_sandbox_provider(Settings(sandbox_backend="vm"))


def test_reap_idle_keeps_busy_and_recent_sessions() -> None:
    provider = LocalSandboxProvider(Settings(sandbox_warm_pool=0, sandbox_idle_s=3600))
    try:
        provider.get("t:recent").run("1", 20)
        assert provider.reap_idle() == []
        assert provider.sessions() == ["t:recent"]
    finally:
        provider.close_all()
