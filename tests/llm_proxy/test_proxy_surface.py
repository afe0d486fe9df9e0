"""The package's declared public surface and its CLI."""

from __future__ import annotations

import subprocess
import sys

import services.llm_proxy as proxy


def test_the_public_surface_is_declared_and_importable() -> None:
    assert set(proxy.__all__) == {
        "PoolSpec", "ProxyApp", "ProxySettings", "ReplicaSpec", "get_proxy_settings",
    }
    for name in proxy.__all__:
        assert getattr(proxy, name) is not None


def test_the_cli_documents_its_flags() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "services.llm_proxy", "--help"],
        capture_output=True, text=True, check=True,
    )
    for flag in ("--host", "--port", "--upstreams", "--pool-file", "--policy"):
        assert flag in result.stdout
