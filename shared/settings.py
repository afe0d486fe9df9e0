"""One settings module for every service: environment variables with the prefix ``TASKYARD_``.

Services reach settings through `get_settings()`, which tests override by setting the
environment before a process starts (or by calling `get_settings.cache_clear()`).
"""

from __future__ import annotations

import socket
from functools import lru_cache

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings", "get_settings"]

_PLACEHOLDER_KEYS = {"", "changeme", "secret"}


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TASKYARD_", extra="ignore", frozen=True)

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

    # Tasks.
    default_max_steps: int = Field(default=8, ge=1)
    task_deadline_s: float = 600.0

    # Sandboxes.
    sandbox_backend: str = "docker"  # "docker" or "local"
    sandbox_image: str = "taskyard/sandbox:latest"
    sandbox_timeout_s: float = 30.0
    # How long an interrupted cell may take to stop before its kernel is replaced.
    sandbox_interrupt_grace_s: float = Field(default=2.0, gt=0)
    sandbox_memory: str = "256m"
    sandbox_pids: int = 64
    sandbox_cpus: float = 1.0
    sandbox_idle_s: float = 600.0
    sandbox_disk: str = "64m"  # size of each tmpfs (/work, /tmp, /dev/shm) inside a sandbox
    sandbox_warm_pool: int = Field(default=1, ge=0)  # started kernels waiting for a session
    sandbox_max_per_tenant: int = Field(default=16, ge=1)  # live sandboxes of one tenant
    sandbox_max_per_worker: int = Field(default=32, ge=1)  # live sandboxes of one tool worker
    # Marks this worker's sandboxes; at start it removes every one left under the same label,
    # so two workers sharing an engine need different labels (hostnames differ by default).
    sandbox_worker_label: str = Field(default_factory=socket.gethostname, min_length=1)
    # Local backend: the cgroup (path in the hierarchy) to make per-sandbox cgroups under;
    # empty: the worker's own.
    sandbox_cgroup_parent: str = ""

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
    def _refuse_placeholder_keys(cls, value: str) -> str:
        for key, _ in (pair.split("=", 1) for pair in value.split(",") if pair):
            if key.strip().lower() in _PLACEHOLDER_KEYS:
                raise ValueError(f"API key {key!r} is a placeholder; set TASKYARD_API_KEYS")
        return value

    def tenants_by_key(self) -> dict[str, str]:
        """API key to tenant name."""
        pairs = (pair.split("=", 1) for pair in self.api_keys.split(",") if "=" in pair)
        return {key.strip(): tenant.strip() for key, tenant in pairs}


@lru_cache
def get_settings() -> Settings:
    return Settings()
