"""One settings module for every service: environment variables with the prefix ``TASKYARD_``.

Services reach settings through `get_settings()`, which tests override by setting the
environment before a process starts (or by calling `get_settings.cache_clear()`).
"""

from __future__ import annotations

import re
from functools import lru_cache
from urllib.parse import urlsplit

from pydantic import Field, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings", "env_name", "get_settings", "items", "parse_api_keys"]

_PLACEHOLDER_KEYS = {"changeme", "secret"}
# Tenant names become part of Redis keys ("session:{tenant}:{session}"): no ":" in them.
_TENANT = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_MODULE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_SIZE = re.compile(r"[0-9]+[kmgKMG]?")  # what Docker and the local sandbox both read


def env_name(field: str) -> str:
    """The environment variable that sets `field`."""
    return f"TASKYARD_{field.upper()}"


def parse_api_keys(text: str) -> dict[str, str]:
    """API key to tenant, from "key=tenant" pairs separated by commas. The ValueError says
    what is wrong without repeating a key."""
    form = "TASKYARD_API_KEYS must be key=tenant pairs separated by commas (k1=team-a,k2=team-b)"
    tenants: dict[str, str] = {}
    for number, item in enumerate(items(text), 1):
        key, sep, tenant = (part.strip() for part in item.partition("="))
        if not (sep and key and tenant):
            raise ValueError(f"{form}; pair {number} is not key=tenant")
        if not _TENANT.fullmatch(tenant):
            raise ValueError(
                f"tenant {tenant!r} (pair {number} of TASKYARD_API_KEYS): use up to 64 "
                "letters, digits, '_', '.' or '-'"
            )
        if key.lower() in _PLACEHOLDER_KEYS:
            raise ValueError(f"the key of pair {number} of TASKYARD_API_KEYS is a placeholder")
        if tenants.setdefault(key, tenant) != tenant:
            raise ValueError(f"pair {number} of TASKYARD_API_KEYS repeats a key for a new tenant")
    if not tenants:
        raise ValueError(f"{form}; it names none")
    return tenants


class Settings(BaseSettings):
    # Inputs stay out of error messages: some are secrets.
    model_config = SettingsConfigDict(
        env_prefix="TASKYARD_", extra="ignore", frozen=True, hide_input_in_errors=True
    )

    # Redis: tasks, events and memory on one database, Celery's broker and results on others.
    redis_url: str = "redis://127.0.0.1:6379/0"
    broker_url: str = "redis://127.0.0.1:6379/1"
    result_backend: str = "redis://127.0.0.1:6379/2"
    # An unacked job (its worker died) returns to its queue after this long; steps are idempotent.
    visibility_timeout_s: int = Field(default=600, ge=1)

    # Gateway auth: "key=tenant" pairs separated by commas.
    api_keys: str = "dev-key=demo"

    # Model calls go through the LLM proxy; the agent worker speaks OpenAI to it.
    llm_base_url: str = "http://127.0.0.1:8400/v1"
    llm_api_key: str = "taskyard"
    default_model: str = "scripted"
    llm_timeout_s: float = 120.0

    # LLM proxy: upstreams as "url" or "model=url" separated by commas, or a YAML pool file.
    proxy_upstreams: str = "http://127.0.0.1:8500/v1"
    proxy_pool_file: str | None = None

    # Gateway: a request body over this many bytes is refused (413) before it is read.
    gateway_max_body_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)

    # Tasks.
    default_max_steps: int = Field(default=8, ge=1)
    task_deadline_s: float = 600.0

    # Agent workers: model tokens reach the event stream in batches of this interval (0: each
    # at once); warm sessions kept per process; connections each process may hold open.
    token_flush_s: float = Field(default=0.03, ge=0)
    agent_session_cache: int = Field(default=10_000, ge=0)
    llm_max_connections: int = Field(default=4096, ge=1)
    redis_max_connections: int = Field(default=64, ge=2)

    # Sandboxes.
    sandbox_backend: str = "docker"  # a key of shared.sandbox.BACKENDS: "docker" or "local"
    sandbox_image: str = "taskyard/sandbox:latest"
    sandbox_timeout_s: float = 30.0
    sandbox_memory: str = "256m"
    sandbox_pids: int = 64
    sandbox_cpus: float = 1.0
    sandbox_idle_s: float = 600.0
    sandbox_disk: str = "64m"  # size of each tmpfs (/work, /tmp) inside a sandbox
    sandbox_warm_pool: int = Field(default=1, ge=0)  # started kernels waiting for a session

    # Web tools: a SearxNG-compatible JSON search API (GET {search_url}/search?q=..&format=json).
    search_url: str = "http://127.0.0.1:8888"
    search_timeout_s: float = 15.0
    search_top_k: int = Field(default=5, ge=1, le=50)
    browse_max_chars: int = Field(default=8000, ge=100)  # page text kept per opened page
    search_results_ttl_s: int = Field(default=3600, ge=1)  # a session's results, in Redis

    # Where user-defined agents and actions live: comma-separated importable module names.
    plugin_modules: str = ""

    @field_validator("api_keys")
    @classmethod
    def _key_tenant_pairs(cls, value: str) -> str:
        parse_api_keys(value)
        return value

    @field_validator("redis_url", "broker_url", "result_backend")
    @classmethod
    def _redis_url(cls, value: str, info: ValidationInfo) -> str:
        _check_url(value, _REDIS_SCHEMES, _env(info), host=False)
        return value

    @field_validator("llm_base_url", "search_url")
    @classmethod
    def _http_url(cls, value: str, info: ValidationInfo) -> str:
        _check_url(value, _HTTP_SCHEMES, _env(info))
        return value

    @field_validator("proxy_upstreams")
    @classmethod
    def _upstream_list(cls, value: str, info: ValidationInfo) -> str:
        for entry in items(value):
            model, url = entry.split("=", 1) if "=" in entry.split("://")[0] else ("*", entry)
            where = f"{_env(info)} (url or model=url, separated by commas)"
            if not model.strip():
                raise ValueError(f"{where}: an entry has no model before its '='")
            _check_url(url.strip(), _HTTP_SCHEMES, where)
        return value

    @field_validator("plugin_modules")
    @classmethod
    def _module_names(cls, value: str, info: ValidationInfo) -> str:
        for name in items(value):
            if not _MODULE.fullmatch(name):
                raise ValueError(
                    f"{_env(info)}: {name!r} is not a module name; give importable names "
                    "separated by commas (my_pkg.agents,my_pkg.tools)"
                )
        return value

    @field_validator("sandbox_memory", "sandbox_disk")
    @classmethod
    def _docker_size(cls, value: str, info: ValidationInfo) -> str:
        if not _SIZE.fullmatch(value):
            raise ValueError(
                f"{_env(info)} must be a number of bytes, optionally followed by k, m or g "
                f"(256m); not {value!r}"
            )
        return value

    def tenants_by_key(self) -> dict[str, str]:
        """API key to tenant name."""
        return parse_api_keys(self.api_keys)


_REDIS_SCHEMES = ("redis", "rediss", "unix", "redis+socket", "sentinel")
_HTTP_SCHEMES = ("http", "https")


def _env(info: ValidationInfo) -> str:
    return env_name(info.field_name or "")


def items(text: str) -> list[str]:
    """The non-empty, stripped items of a comma-separated setting."""
    return [item.strip() for item in text.split(",") if item.strip()]


def _check_url(value: str, schemes: tuple[str, ...], where: str, host: bool = True) -> None:
    parts = urlsplit(value)
    if parts.scheme not in schemes or not (parts.netloc or (not host and parts.path)):
        raise ValueError(
            f"{where} needs a URL starting with {' or '.join(s + '://' for s in schemes)}"
        )  # the value is not repeated: a URL may hold a password


@lru_cache
def get_settings() -> Settings:
    return Settings()
