"""taskyard's LLM proxy as a benchmark child: one worker process, configured by environment."""

from __future__ import annotations

from _procs import ROOT, Processes, free_port, python

__all__ = ["proxy_available", "start_taskyard_proxy"]


def proxy_available() -> bool:
    """Whether `python -m services.llm_proxy` exists in this checkout yet."""
    return (ROOT / "services" / "llm_proxy" / "__main__.py").exists()


def start_taskyard_proxy(procs: Processes, name: str, upstreams: list[str], policy: str) -> str:
    """Start the proxy in front of replica root URLs with a routing policy; returns its URL."""
    port = free_port()
    env = {
        "TASKYARD_PROXY_HOST": "127.0.0.1",
        "TASKYARD_PROXY_PORT": str(port),
        "TASKYARD_PROXY_UPSTREAMS": ",".join(f"{url}/v1" for url in upstreams),
        "TASKYARD_PROXY_POLICY": policy,
    }
    procs.start(name, [python(), "-m", "services.llm_proxy"], env)
    url = f"http://127.0.0.1:{port}"
    procs.wait_http(name, f"{url}/healthz", timeout_s=60.0)
    return url
