"""The engine proxy as a child process, and each tool worker's way to it (`EngineAccess`): a
`DOCKER_HOST` naming the proxy and a `DOCKER_CONFIG` whose config.json holds the worker's own
token, which the Docker SDK sends on every request."""

from __future__ import annotations

import json
import os
import secrets
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from devstack.procs import Child, Processes
from services.engine_proxy import TOKEN_HEADER

__all__ = ["EngineAccess", "engine_proxy_argv", "start_engine_proxy"]

_RAW_ENGINE = "unix:///var/run/docker.sock"


@dataclass(frozen=True)
class EngineAccess:
    """The proxy's socket in `run_dir`, and a token and a Docker config per worker."""

    run_dir: Path
    tokens: Mapping[str, str]  # worker name to token

    @classmethod
    def for_workers(cls, names: Iterable[str], run_dir: Path) -> EngineAccess:
        """Fresh tokens for `names`, each written into its worker's Docker config."""
        access = cls(run_dir, {name: secrets.token_hex(32) for name in names})
        for name in access.tokens:
            access.write_config(name)
        return access

    @property
    def address(self) -> str:
        """The proxy's `DOCKER_HOST`."""
        return f"unix://{self.run_dir / 'engine-proxy.sock'}"

    def config_dir(self, name: str) -> Path:
        return self.run_dir / "docker-config" / name

    def write_config(self, name: str) -> None:
        """The worker's DOCKER_CONFIG directory: its token as an HTTP header, readable by the
        worker's user alone."""
        folder = self.config_dir(name)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        config = folder / "config.json"
        config.touch(mode=0o600)
        config.write_text(json.dumps({"HttpHeaders": {TOKEN_HEADER: self.tokens[name]}}))

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
        return {"DOCKER_HOST": self.address, "DOCKER_CONFIG": str(self.config_dir(name))}


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
