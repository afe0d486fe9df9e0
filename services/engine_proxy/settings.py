"""The engine proxy's settings: its own pydantic-settings class, read from `TASKYARD_*`
variables (`TASKYARD_SANDBOX_IMAGE` keeps the name and default the tool worker reads).

The limits here are maxima: a create asking for more is refused; the tool worker's own
`SANDBOX_*` limits must fit under them.
"""

from __future__ import annotations

import re
from functools import lru_cache

from pydantic import Field, SecretStr, ValidationInfo, field_validator

from taskyard.plumbing.settings import Area, items
from taskyard.plumbing.settings.checks import check_size, variable

__all__ = ["CALLER_NAME", "EngineProxySettings", "get_engine_proxy_settings", "size_bytes"]

# A caller's name ends up in container names (`ownership`): what the engine accepts there.
CALLER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
_MIN_TOKEN = 32
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


class EngineProxySettings(Area):
    """Engine proxy.

    Between the tool workers and the Docker engine: a worker may make and use sandbox
    containers of its own and nothing else (docs/security.md, the engine proxy).
    """

    sandbox_image: str = "taskyard/sandbox:latest"
    """The sandbox image (docker backend)."""
    engine_proxy_listen: str = Field(
        default="unix:///run/taskyard/engine-proxy.sock", pattern=r"^(unix:///.+|tcp://.+:\d+)$"
    )
    """Where the tool workers reach the proxy, as their `DOCKER_HOST` names it: `unix:///path`
    or `tcp://host:port` (port 0: a free one)."""
    engine_proxy_engine: str = Field(
        default="unix:///var/run/docker.sock", pattern=r"^(unix:///.+|tcp://.+:\d+)$"
    )
    """The Docker engine's own socket, which only the proxy opens."""
    engine_proxy_callers: SecretStr = SecretStr("")
    """The tool workers and their credentials, `name=token` pairs separated by commas (a token
    of 32 characters or more, e.g. `openssl rand -hex 32`); each worker holds its own as
    `SANDBOX_ENGINE_TOKEN`."""
    engine_proxy_runtimes: str = "runc"
    """The OCI runtimes a sandbox may ask for, comma-separated (`runc`, `runsc`)."""
    engine_proxy_user: str = "65534:65534"
    """The user every sandbox and every exec in one runs as."""
    engine_proxy_tmpfs: str = "/work,/tmp"
    """The only tmpfs mounts a sandbox may have, comma-separated paths."""
    engine_proxy_max_memory: str = "1g"
    """The most memory (swap included) a sandbox may ask for."""
    engine_proxy_max_pids: int = Field(default=1024, ge=1)
    """The largest pids limit a sandbox may ask for (under gVisor the tool worker asks
    64 + 8 x `SANDBOX_PIDS`)."""
    engine_proxy_max_cpus: float = Field(default=2.0, gt=0)
    """The most CPUs a sandbox may ask for."""
    engine_proxy_max_disk: str = "256m"
    """The largest tmpfs (and /dev/shm) a sandbox may ask for."""
    engine_proxy_max_sessions: int = Field(default=64, ge=1)
    """The most sessions a fork-server sandbox holds: its memory and pids may be this many
    times one sandbox's."""
    engine_proxy_max_body_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    """The largest request body (a file put into a sandbox)."""
    engine_proxy_reap_s: float = Field(default=60.0, gt=0)
    """How often the proxy removes handed-off sandboxes that ended with no worker taking them
    over (their maker may never start again to remove them)."""

    @field_validator("engine_proxy_max_memory", "engine_proxy_max_disk")
    @classmethod
    def _sizes(cls, value: str, info: ValidationInfo) -> str:
        check_size(value, variable(info))
        return value

    @field_validator("engine_proxy_callers")
    @classmethod
    def _caller_pairs(cls, value: SecretStr, info: ValidationInfo) -> SecretStr:
        parse_callers(value, variable(info))
        return value

    def callers(self) -> dict[str, str]:
        """Each caller's name by its token."""
        return parse_callers(self.engine_proxy_callers, "TASKYARD_ENGINE_PROXY_CALLERS")

    @property
    def runtimes(self) -> frozenset[str]:
        return frozenset(items(self.engine_proxy_runtimes))

    @property
    def tmpfs_paths(self) -> frozenset[str]:
        return frozenset(items(self.engine_proxy_tmpfs))


def parse_callers(value: SecretStr, where: str) -> dict[str, str]:
    """Name by token, from `name=token` pairs; the ValueError never repeats a token."""
    form = f"{where} must be name=token pairs separated by commas"
    callers: dict[str, str] = {}
    for number, pair in enumerate(items(value.get_secret_value()), 1):
        name, sep, token = (part.strip() for part in pair.partition("="))
        if not (sep and CALLER_NAME.fullmatch(name)):
            raise ValueError(f"{form}; pair {number}'s name is not letters, digits, _ . -")
        if len(token) < _MIN_TOKEN or token in callers:
            raise ValueError(f"{form}; {name}'s token is shorter than 32 or not its own")
        if name in callers.values():
            raise ValueError(f"{form}; {name} is named twice")
        callers[token] = name
    return callers


def size_bytes(text: str) -> int:
    """Bytes in a Docker size ("256m", "1g", "65536")."""
    number, unit = text[:-1], text[-1].lower()
    if unit.isdigit():
        number, unit = text, ""
    return int(number) * _UNITS[unit]


@lru_cache
def get_engine_proxy_settings() -> EngineProxySettings:
    """The process's engine proxy settings, read once from the environment."""
    return EngineProxySettings()
