"""One settings module for every service: environment variables with the prefix ``TASKYARD_``.

Services reach settings through `get_settings()`, which tests override by setting the
environment before a process starts (or by calling `get_settings.cache_clear()`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic import Field, IPvAnyNetwork, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from redis.connection import parse_url

__all__ = ["Settings", "broker_database", "get_settings"]

_PLACEHOLDER_KEYS = {"", "changeme", "secret"}


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TASKYARD_", extra="ignore", frozen=True)

    # Redis: tasks, events and memory on one database, Celery's broker and results on others.
    # The broker must be on the store's server (see `broker_database`); unset, the broker and
    # the result backend follow `redis_url` onto its server's databases 1 and 2.
    redis_url: str = "redis://127.0.0.1:6379/0"
    broker_url: str = ""
    result_backend: str = ""
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

    # The sweep (Celery beat, every `sweep_interval_s`): a live task that has not moved for
    # `stall_s` has what it waits on sent again; a task past its deadline ends timed_out.
    # `stall_s` must exceed the longest legitimate step (a model call's timeout, a cell's).
    sweep_interval_s: float = Field(default=30.0, gt=0)
    stall_s: float = Field(default=300.0, gt=0)

    # Agent workers: model tokens reach the event stream in batches of this interval (0: each
    # at once); warm sessions kept per process; connections each process may hold open.
    token_flush_s: float = Field(default=0.03, ge=0)
    agent_session_cache: int = Field(default=10_000, ge=0)
    llm_max_connections: int = Field(default=4096, ge=1)
    redis_max_connections: int = Field(default=64, ge=2)
    # Celery's broker connections per worker process: at least the worker's concurrency.
    broker_max_connections: int = Field(default=2048, ge=10)

    # Sandboxes.
    sandbox_backend: str = "docker"  # "docker" or "local"
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
    search_engines: str = ""  # SearxNG engine names, comma-separated; empty: the instance's own
    search_timeout_s: float = 15.0
    search_top_k: int = Field(default=5, ge=1, le=50)
    search_results_ttl_s: int = Field(default=3600, ge=1)  # a session's results, in Redis
    # Opening pages: only public addresses unless allowed here (the server-side request guard).
    browse_allow_private: bool = False  # true: any address (tests, a laptop); never in production
    # Networks opened even though private, comma-separated CIDRs: "10.20.0.0/16,fd00:1::/64".
    browse_allow_networks: Annotated[tuple[IPvAnyNetwork, ...], NoDecode] = ()
    browse_timeout_s: float = Field(default=15.0, gt=0)  # a whole page read, redirects included
    browse_max_bytes: int = Field(default=2 * 1024 * 1024, ge=1024)  # body read, then cut
    browse_max_chars: int = Field(default=8000, ge=100)  # page text shown per opened page
    browse_cache_ttl_s: int = Field(default=3600, ge=1)  # a session's opened pages, in Redis

    # Where user-defined agents and actions live: comma-separated importable module names.
    plugin_modules: str = ""

    @field_validator("api_keys")
    @classmethod
    def _refuse_placeholder_keys(cls, value: str) -> str:
        for key, _ in (pair.split("=", 1) for pair in value.split(",") if pair):
            if key.strip().lower() in _PLACEHOLDER_KEYS:
                raise ValueError(f"API key {key!r} is a placeholder; set TASKYARD_API_KEYS")
        return value

    @field_validator("browse_allow_networks", mode="before")
    @classmethod
    def _split_networks(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @model_validator(mode="before")
    @classmethod
    def _celery_beside_the_store(cls, data: Any) -> Any:
        if isinstance(data, dict):
            store = str(data.get("redis_url") or cls.model_fields["redis_url"].default)
            for name, db in (("broker_url", 1), ("result_backend", 2)):
                if not data.get(name):
                    data[name] = _on_db(store, db)
        return data

    @model_validator(mode="after")
    def _broker_beside_the_store(self) -> Settings:
        broker_database(self.redis_url, self.broker_url)
        return self

    def tenants_by_key(self) -> dict[str, str]:
        """API key to tenant name."""
        pairs = (pair.split("=", 1) for pair in self.api_keys.split(",") if "=" in pair)
        return {key.strip(): tenant.strip() for key, tenant in pairs}


def _on_db(url: str, db: int) -> str:
    """`url` with its database number replaced by `db`."""
    parts = urlsplit(url)
    if parts.scheme == "unix":  # the database is a query parameter there
        query = [(k, v) for k, v in parse_qsl(parts.query) if k != "db"] + [("db", str(db))]
        return f"unix://{parts.path}?{urlencode(query)}"
    return urlunsplit(parts._replace(path=f"/{db}"))


def broker_database(store_url: str, broker_url: str) -> int:
    """The broker's database number, checked to be on the store's Redis server: a commit and
    the jobs it starts are one atomic write (see `shared.jobs`)."""
    store, broker = parse_url(store_url), parse_url(broker_url)
    if any(store.get(k) != broker.get(k) for k in ("host", "port", "path")):
        raise ValueError(
            "TASKYARD_BROKER_URL must be on the same Redis server as TASKYARD_REDIS_URL "
            "(another database number is fine): a step's commit and the jobs it starts are "
            f"one atomic write; got broker {broker_url!r}, store {store_url!r}"
        )
    return int(broker.get("db", 0))


@lru_cache
def get_settings() -> Settings:
    return Settings()
