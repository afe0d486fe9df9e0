"""The engine proxy as a child process, and each tool worker's way to it (`EngineAccess`): a
`DOCKER_HOST` naming the proxy and the worker's own token (`TASKYARD_SANDBOX_ENGINE_TOKEN`)."""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from devstack.procs import Child, Processes

__all__ = ["EngineAccess", "engine_proxy_argv", "raw_engine", "start_engine_proxy"]

_RAW_ENGINE = "unix:///var/run/docker.sock"


@dataclass(frozen=True)
class EngineAccess:
    """The proxy's address (a `DOCKER_HOST`) and a token per worker."""

    address: str
    tokens: Mapping[str, str]  # worker name to token

    @classmethod
    def for_workers(cls, names: Iterable[str], address: str) -> EngineAccess:
        """Fresh tokens for `names`, reaching a proxy at `address`."""
        return cls(address, {name: secrets.token_hex(32) for name in names})

    def proxy_env(self) -> dict[str, str]:
        """The proxy's own settings: where it listens, the engine, the workers' tokens."""
        callers = ",".join(f"{name}={token}" for name, token in self.tokens.items())
        return {
            "TASKYARD_ENGINE_PROXY_LISTEN": self.address,
            "TASKYARD_ENGINE_PROXY_ENGINE": raw_engine(),
            "TASKYARD_ENGINE_PROXY_CALLERS": callers,
        }

    def worker_env(self, name: str) -> dict[str, str]:
        """What worker `name` reaches the engine with: the proxy, under its own token."""
        return {"DOCKER_HOST": self.address, "TASKYARD_SANDBOX_ENGINE_TOKEN": self.tokens[name]}


def raw_engine() -> str:
    """The engine this process reaches (its `DOCKER_HOST`, else the default socket)."""
    return os.environ.get("DOCKER_HOST") or _RAW_ENGINE


def engine_proxy_argv() -> list[str]:
    """`python -m services.engine_proxy`; its settings come from the environment."""
    return [sys.executable, "-m", "services.engine_proxy"]


def start_engine_proxy(
    procs: Processes, name: str, access: EngineAccess, env: Mapping[str, str] | None = None
) -> Child:
    """The engine proxy for `access`'s workers, with more TASKYARD_* settings in `env` (the
    sandbox image, the limits); returns once it listens."""
    child = procs.start(
        name, engine_proxy_argv(), env={**os.environ, **(env or {}), **access.proxy_env()}
    )
    child.wait_log("listening on")
    return child
