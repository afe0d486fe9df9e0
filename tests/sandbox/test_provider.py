"""The package surface, the backend registry, and what every provider does with sessions:
quotas, eviction, interrupts, the start-up check."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

import taskyard.sandbox
from taskyard.agentkit.actions import ActionExecutor, IPythonInterpreter
from taskyard.agentkit.schema import ActionReturn, ActionStatusCode, AgentMessage
from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.sandbox import (
    BACKENDS,
    LocalSandboxProvider,
    SandboxLimitReached,
    SandboxLimits,
    make_sandbox_provider,
)
from taskyard.sandbox.provider import KernelSandboxProvider

ProviderFactory = Callable[..., KernelSandboxProvider]


def test_public_surface_is_declared() -> None:
    for name in taskyard.sandbox.__all__:
        assert hasattr(taskyard.sandbox, name), name


def test_registry_maps_backend_names() -> None:
    assert set(BACKENDS) == {"docker", "local"}
    # docker's imports the Docker SDK on use; each gets the worker's node name.
    local = BACKENDS["local"](
        ToolWorkerSettings(sandbox_backend="local", sandbox_warm_pool=0), "n@h"
    )
    try:
        assert isinstance(local, LocalSandboxProvider)
    finally:
        local.close_all()


def test_factory_builds_the_configured_backend() -> None:
    provider = make_sandbox_provider(
        ToolWorkerSettings(sandbox_backend="local", sandbox_warm_pool=0)
    )
    try:
        assert isinstance(provider, LocalSandboxProvider)
        assert provider.get("a:b").run("21 * 2", 20).result == "42"
    finally:
        provider.close_all()


def test_factory_refuses_unknown_backends() -> None:
    with pytest.raises(ValueError, match="unknown sandbox_backend 'vm'; known: docker, local"):
        make_sandbox_provider(ToolWorkerSettings(sandbox_backend="vm"))


def test_reap_idle_keeps_busy_and_recent_sessions() -> None:
    provider = LocalSandboxProvider(ToolWorkerSettings(sandbox_warm_pool=0, sandbox_idle_s=3600))
    try:
        provider.get("t:recent").run("1", 20)
        assert provider.reap_idle() == []
        assert provider.sessions() == ["t:recent"]
    finally:
        provider.close_all()


def _running(provider: KernelSandboxProvider, key: str, code: str) -> threading.Thread:
    """`code` running in `key`'s sandbox in a thread; from its kernel's start it is busy."""
    worker = threading.Thread(target=provider.get(key).run, args=(code, 60))
    worker.start()
    deadline = time.monotonic() + 20
    while not provider.get(key).has_kernel:
        assert time.monotonic() < deadline, "the cell never started"
        time.sleep(0.01)
    return worker


def test_a_full_tenant_evicts_its_least_recently_used_idle_sandbox(
    make_local_provider: ProviderFactory,
) -> None:
    provider = make_local_provider(limits=SandboxLimits(per_tenant=2, per_worker=10))
    for key in ("a:1", "a:2", "b:1"):
        provider.get(key).run(f"me = {key!r}", 20)
    provider.get("a:1").run("me", 20)  # a:2 is now the least recently used of tenant a
    assert provider.get("a:3").run("1", 20).result == "1"
    evicted = provider.get("a:2").run("me", 20)
    assert evicted.state_lost and "NameError" in (evicted.error or "")
    assert (evicted.state_lost_reason or "").startswith("session evicted: tenant 'a' reached")
    assert provider.get("b:1").run("me", 20).result == "'b:1'"  # other tenants untouched


def test_a_full_worker_evicts_across_tenants(make_local_provider: ProviderFactory) -> None:
    provider = make_local_provider(limits=SandboxLimits(per_tenant=5, per_worker=2))
    provider.get("a:1").run("x = 1", 20)
    provider.get("b:1").run("x = 2", 20)
    provider.get("c:1").run("x = 3", 20)
    assert provider.get("a:1").run("x", 20).state_lost_reason == (
        "session evicted: this worker reached its limit of 2 live sandboxes"
    )


def test_a_full_tenant_whose_sandboxes_are_all_busy_gets_a_clear_tool_error(
    make_local_provider: ProviderFactory,
) -> None:
    provider = make_local_provider(limits=SandboxLimits(per_tenant=1, per_worker=10))
    busy = _running(provider, "a:busy", "import time\ntime.sleep(60)")
    try:
        with pytest.raises(SandboxLimitReached, match="tenant 'a' already has 1 live sandboxes"):
            provider.get("a:2").run("1", 20)
        tool = ActionExecutor([IPythonInterpreter(provider, timeout=20)])
        call = {"name": "IPythonInterpreter", "parameters": {"command": "1"}}
        ret = tool(AgentMessage(sender="assistant", content=call), "a:3").content
        assert isinstance(ret, ActionReturn) and ret.state == ActionStatusCode.API_ERROR
        assert "SANDBOX_MAX_PER_TENANT" in (ret.errmsg or "")
    finally:
        assert provider.interrupt("a:busy")
        busy.join(20)


def test_check_starts_and_stops_a_kernel(make_local_provider: ProviderFactory) -> None:
    provider = make_local_provider()
    provider.check()
    assert provider.sessions() == []
