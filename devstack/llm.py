"""The model side as children: scripted model replicas (the stand-in for vLLM) and the LLM proxy.

Started on port 0, each prints "listening on <url>" first; the functions return that root URL.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from devstack.procs import Processes

__all__ = ["proxy_argv", "scripted_model_argv", "start_proxy", "start_scripted_model"]


def scripted_model_argv(*flags: str, host: str = "127.0.0.1", port: int = 0) -> list[str]:
    """`python -m devstack.scripted_model` with its flags (`--latency-ms`, ...)."""
    return [sys.executable, "-m", "devstack.scripted_model", "--host", host, "--port", str(port),
            *flags]  # fmt: skip


def proxy_argv(
    upstreams: str | None = None,
    *,
    pool_file: str | None = None,
    policy: str | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
) -> list[str]:
    """`python -m services.llm_proxy`; what is not given comes from its TASKYARD_* settings."""
    argv = [sys.executable, "-m", "services.llm_proxy", "--host", host, "--port", str(port)]
    flags = (("--upstreams", upstreams), ("--pool-file", pool_file), ("--policy", policy))
    for flag, value in flags:
        if value is not None:
            argv += [flag, value]
    return argv


def start_scripted_model(procs: Processes, name: str, *flags: str, port: int = 0) -> str:
    """A scripted model replica on `port` (0: a free one); its root URL."""
    return procs.start(name, scripted_model_argv(*flags, port=port)).announced_url()


def start_proxy(
    procs: Processes,
    name: str,
    upstreams: str | None = None,
    *,
    pool_file: str | None = None,
    policy: str | None = None,
    env: Mapping[str, str] | None = None,
) -> str:
    """The LLM proxy on a free port, with more TASKYARD_* settings in `env` on top of ours;
    its root URL (clients use ``<url>/v1``)."""
    argv = proxy_argv(upstreams, pool_file=pool_file, policy=policy)
    return procs.start(name, argv, env={**os.environ, **(env or {})}).announced_url()
