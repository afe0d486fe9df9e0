"""taskyard's LLM proxy as a benchmark child: one worker process, configured by its flags."""

from __future__ import annotations

import os
import sys

from devstack.llm import start_proxy
from devstack.procs import ROOT, Processes, free_port

__all__ = ["proxy_available", "start_asgi_proxy", "start_taskyard_proxy"]

ASGI_PROXY = ROOT / "bench" / "_asgi_proxy.py"


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


def start_asgi_proxy(procs: Processes, name: str, upstreams: list[str]) -> str:
    """The same proxy served by uvicorn through a raw ASGI app (`_asgi_proxy.py`)."""
    port = free_port()
    argv = [sys.executable, str(ASGI_PROXY), "--port", str(port)]
    argv += ["--upstreams", ",".join(f"{url}/v1" for url in upstreams)]
    child = procs.start(name, argv, {**os.environ, "PYTHONPATH": str(ROOT)})
    url = f"http://127.0.0.1:{port}"
    child.wait_http(f"{url}/healthz", timeout_s=60.0)
    return url
