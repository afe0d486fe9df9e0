"""taskyard's LLM proxy as a benchmark child: one worker process, configured by its flags."""

from __future__ import annotations

from devstack.llm import start_proxy
from devstack.procs import ROOT, Processes

__all__ = ["proxy_available", "start_taskyard_proxy"]


def proxy_available() -> bool:
    """Whether `python -m services.llm_proxy` exists in this checkout yet."""
    return (ROOT / "services" / "llm_proxy" / "__main__.py").exists()


def start_taskyard_proxy(
    procs: Processes,
    name: str,
    upstreams: list[str],
    policy: str | None = None,
    env: dict[str, str] | None = None,
) -> str:
    """Start the proxy in front of replica root URLs (default policy unless one is named),
    with more TASKYARD_* settings in `env`; its root URL."""
    flags = ",".join(f"{url}/v1" for url in upstreams)
    return start_proxy(procs, name, flags, policy=policy, env=env)
