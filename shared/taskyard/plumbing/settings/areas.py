"""(Some 400 lines: one short class per area, 15 areas a table reads side by side.)

The settings areas the services share: Redis and Celery's broker, model calls, tasks and the
sweep, what a 202 promises, the gateway, webhooks, schedules, the agent worker's run,
observability and plugins. (The tool worker's areas are in `taskyard.plumbing.settings.tools`.)

Each area is a pydantic-settings class reading `TASKYARD_<FIELD>`; a service's class is the
union of the areas it reads (`taskyard.plumbing.settings.services`). A field's docstring is its
description, in the README's configuration table too. An area that needs another's fields
for a check (the broker beside the store, a 202 under Sentinel) inherits it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from taskyard.plumbing.redis_clients import SentinelSpec
from taskyard.plumbing.settings.checks import (
    HttpUrl,
    HttpUrlOrEmpty,
    RedisUrl,
    broker_database,
    check_module_names,
    check_token_secret,
    env_name,
    items,
    on_db,
    parse_api_keys,
    parse_sentinels,
    parse_tenant_seconds,
    variable,
)

__all__ = [
    "AcceptSettings",
    "AgentRunSettings",
    "Area",
    "BrokerSettings",
    "GatewayAreaSettings",
    "MetricsSettings",
    "ModelSettings",
    "OtlpSettings",
    "PluginSettings",
    "RedisSentinelSettings",
    "RedisSettings",
    "ScheduleSettings",
    "SweepSettings",
    "TaskSettings",
    "TenantTokenSettings",
    "WebhookSettings",
]


class Area(BaseSettings):
    """The base of every area: the `TASKYARD_` prefix, frozen, inputs kept out of errors
    (some are secrets), field docstrings as descriptions."""

    model_config = SettingsConfigDict(
        env_prefix="TASKYARD_",
        extra="ignore",
        frozen=True,
        hide_input_in_errors=True,
        use_attribute_docstrings=True,
    )


class RedisSentinelSettings(Area):
    """Redis through Sentinel.

    For every settings class that reaches Redis: the sentinels and the name of the master they
    monitor name the server, over the host and port of every Redis URL; the URLs still give the
    database numbers and the password. Both, or neither.
    """

    redis_sentinels: str = ""
    """Sentinels' `host:port` entries, comma-separated (an IPv6 host in brackets); with
    `REDIS_MASTER`, the master they name is the server of every Redis URL."""
    redis_master: str = ""
    """The name of the master the sentinels monitor (their `sentinel monitor <name>`)."""

    @field_validator("redis_sentinels")
    @classmethod
    def _sentinel_addresses(cls, value: str) -> str:
        parse_sentinels(value)
        return value

    @model_validator(mode="after")
    def _both_or_neither(self) -> RedisSentinelSettings:
        if bool(items(self.redis_sentinels)) != bool(self.redis_master.strip()):
            raise ValueError(
                "TASKYARD_REDIS_SENTINELS and TASKYARD_REDIS_MASTER go together: the "
                "sentinels' addresses and the name of the master they monitor (as in their "
                "`sentinel monitor <name> ...` line); set both, or neither for plain Redis URLs"
            )
        return self

    @property
    def sentinel(self) -> SentinelSpec | None:
        """Where Sentinel says the master is, or None: the URLs' servers."""
        if not self.redis_master.strip():
            return None
        return SentinelSpec(parse_sentinels(self.redis_sentinels), self.redis_master.strip())

    def check_sentinel_urls(self, urls: Mapping[str, str | None]) -> None:
        """Under Sentinel, refuse a URL that is not redis:// (a socket, TLS, a sentinel://
        URL): it would give more than a database number and credentials."""
        if self.sentinel is None:
            return
        for name, url in urls.items():
            if url is not None and urlsplit(url).scheme != "redis":
                raise ValueError(
                    f"{env_name(name)} must be a redis:// URL when TASKYARD_REDIS_SENTINELS is "
                    "set: Sentinel names the server, the URL gives the database number and "
                    "the password (TLS and Unix sockets are not supported with Sentinel)"
                )


class RedisSettings(RedisSentinelSettings):
    """Redis.

    Tasks, events, memory and sessions, on one database.
    """

    redis_url: RedisUrl = "redis://127.0.0.1:6379/0"
    """The store's Redis (`redis://`, `rediss://`, `unix://`); under Sentinel only its
    database number and password count."""
    redis_max_connections: int = Field(default=64, ge=2)
    """Connections each process's store client may hold open."""

    @model_validator(mode="after")
    def _store_under_sentinel(self) -> RedisSettings:
        self.check_sentinel_urls({"redis_url": self.redis_url})
        return self


class BrokerSettings(RedisSettings):
    """Celery's broker.

    The broker and results, on the store's Redis server (a step's commit and the jobs it
    starts are one atomic write): unset, the broker shares the store's database (a commit
    pushes its jobs with no SELECT) and results go to its database 2.
    """

    broker_url: RedisUrl = ""
    """Celery's broker; empty: `REDIS_URL` itself. Must be on the store's server (another
    database costs a SELECT a commit)."""
    result_backend: RedisUrl = ""
    """Celery's result backend; empty: database 2 of `REDIS_URL`."""
    visibility_timeout_s: int = Field(default=600, ge=1)
    """An unacked job (its worker died) returns to its queue after this long; steps are
    idempotent. Keep it well above a job's run: an ack reaches Redis up to a second late."""
    broker_max_connections: int = Field(default=2048, ge=10)
    """Celery's broker connections per worker process: at least the worker's concurrency."""
    celery_job_logs: bool = False
    """Celery's own INFO lines for each job received and succeeded (about 30 us of CPU per
    job); retries, failures and taskyard's own lines are logged either way."""

    @model_validator(mode="before")
    @classmethod
    def _celery_beside_the_store(cls, data: Any) -> Any:
        if isinstance(data, dict):
            store = str(data.get("redis_url") or cls.model_fields["redis_url"].default)
            data["broker_url"] = data.get("broker_url") or store
            data["result_backend"] = data.get("result_backend") or on_db(store, 2)
        return data

    @model_validator(mode="after")
    def _broker_beside_the_store(self) -> BrokerSettings:
        urls = {"broker_url": self.broker_url, "result_backend": self.result_backend}
        self.check_sentinel_urls(urls)
        broker_database(self.redis_url, self.broker_url, sentinel=self.sentinel is not None)
        return self


class ModelSettings(Area):
    """Model calls.

    They go through the LLM proxy, in OpenAI's format.
    """

    llm_base_url: HttpUrl = "http://127.0.0.1:8400/v1"
    """The OpenAI-compatible endpoint model calls go to (the proxy)."""
    llm_api_key: str = "taskyard"
    """The API key model calls carry when tenant tokens are off."""
    default_model: str = "scripted"
    """The model of a spec that names none."""
    llm_timeout_s: float = 120.0
    """How long one model call may take."""


class TenantTokenSettings(Area):
    """Tenant tokens.

    Shared by the agent workers and the proxy only (never the tool workers).
    """

    llm_token_secret: SecretStr = SecretStr("")
    """Signs each model call's token naming its task's tenant, so the proxy counts and limits
    it as that tenant's; at least 32 characters (`openssl rand -hex 32`). Empty: calls carry
    `LLM_API_KEY` and the proxy sees one tenant."""

    @field_validator("llm_token_secret")
    @classmethod
    def _token_secret(cls, value: SecretStr, info: ValidationInfo) -> SecretStr:
        check_token_secret(value, variable(info))
        return value


class TaskSettings(Area):
    """Tasks.

    The limits a task's spec may leave unset.
    """

    default_max_steps: int = Field(default=8, ge=1)
    """Agent steps a task may take unless its spec says."""
    task_deadline_s: float = Field(default=600.0, gt=0)
    """Wall-clock seconds a task may run before it ends timed_out, unless its spec's
    `deadline_s` says (or its tenant's maximum is shorter)."""
    task_max_deadline_s: float = Field(default=3600.0, gt=0)
    """The longest `deadline_s` a task's spec may ask for (a longer one is refused, 422), for
    every tenant `TASK_MAX_DEADLINES` does not name."""
    task_max_deadlines: str = ""
    """Tenants' own maximums instead: `tenant=seconds` pairs, comma-separated
    (`batch=86400,lookup=60`)."""

    @field_validator("task_max_deadlines")
    @classmethod
    def _tenant_seconds(cls, value: str, info: ValidationInfo) -> str:
        parse_tenant_seconds(value, variable(info))
        return value

    def max_deadline_s(self, tenant: str) -> float:
        """The longest deadline a task of `tenant` may have."""
        own = parse_tenant_seconds(self.task_max_deadlines, env_name("task_max_deadlines"))
        return own.get(tenant, self.task_max_deadline_s)


class SweepSettings(Area):
    """The sweep.

    Celery beat sends it every `sweep_interval_s`: a live task that has not moved for `stall_s`
    has what it waits on sent again; a task past its deadline ends timed_out.
    """

    sweep_interval_s: float = Field(default=30.0, gt=0)
    """How often beat sends the sweep."""
    stall_s: float = Field(default=300.0, gt=0)
    """A task standing still this long is re-driven; must exceed the longest legitimate step
    (a model call's timeout, a cell's)."""


class AcceptSettings(RedisSentinelSettings):
    """What a 202 promises.

    For the gateway and the schedules alike (docs/deployment.md, Redis failover).
    """

    gateway_accept_replicas: int | None = Field(default=None, ge=0)
    """Replicas that must hold a task (Redis WAIT) before its 202; unset: 1 under Sentinel (a
    failover then loses no accepted task), 0 without (the primary's AOF alone)."""
    gateway_accept_wait_ms: int = Field(default=500, ge=1)
    """How long to wait for those replicas before a 503 with Retry-After."""

    @property
    def accept_replicas(self) -> int:
        """How many replicas must hold a task before the gateway answers 202."""
        if self.gateway_accept_replicas is not None:
            return self.gateway_accept_replicas
        return 1 if self.redis_master.strip() else 0  # under Sentinel (both or neither are set)


class GatewayAreaSettings(Area):
    """Gateway.

    Who may call it, how much it reads, its event streams.
    """

    api_keys: str = "dev-key=demo"
    """API keys and their tenants: `key=tenant` pairs, comma-separated (tenant names: up to
    64 letters, digits, `_`, `.`, `-`)."""
    gateway_max_body_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    """A request body over this many bytes is refused (413) before it is read."""
    gateway_sse_keep_alive_s: float = Field(default=15.0, gt=0)
    """A quiet event stream gets a keep-alive comment this often (proxies close idle
    connections)."""
    gateway_fork_timeout_s: float = Field(default=60.0, gt=0)
    """How long a session fork waits for the tool worker holding the session's interpreter
    to copy it (100 MB of arrays take 10 to 14 s with one container per session)."""

    @field_validator("api_keys")
    @classmethod
    def _key_tenant_pairs(cls, value: str) -> str:
        parse_api_keys(value)
        return value

    def tenants_by_key(self) -> dict[str, str]:
        """API key to tenant name."""
        return parse_api_keys(self.api_keys)


class WebhookSettings(Area):
    """Webhooks.

    Failures retry from `webhook_retry_base_s`, doubling up to `webhook_retry_max_s`, for
    `webhook_retry_for_s`.
    """

    webhook_allow_private: bool = False
    """Accept private, loopback and link-local receivers (tests, a laptop)."""
    webhook_timeout_s: float = Field(default=10.0, gt=0)
    """How long each delivery attempt waits."""
    webhook_retry_base_s: float = Field(default=2.0, gt=0)
    """The first retry's delay."""
    webhook_retry_max_s: float = Field(default=3600.0, gt=0)
    """The longest delay between retries."""
    webhook_retry_for_s: float = Field(default=24 * 3600.0, gt=0)
    """How long a delivery is retried before it is given up."""


class ScheduleSettings(Area):
    """Schedules.

    Celery beat sends their tick; a run whose time passed more than `schedule_grace_s` ago was
    missed, and the schedule's `missed` policy decides.
    """

    schedule_tick_s: float = Field(default=10.0, gt=0)
    """How often beat sends the schedules' tick."""
    schedule_grace_s: float = Field(default=60.0, gt=0)
    """A run time older than this when its tick comes was missed (beat was down)."""
    schedule_min_interval_s: float = Field(default=60.0, gt=0)
    """The shortest interval a cron may fire at (a six-field cron has seconds)."""
    schedules_max_per_tenant: int = Field(default=100, ge=1)
    """Schedules one tenant may have."""
    schedule_runs_kept: int = Field(default=100, ge=1)
    """Latest runs kept (and listed) per schedule."""


class AgentRunSettings(Area):
    """Agent worker.

    Its run of a step: model calls, the event stream, memory compaction.
    """

    llm_token_ttl_s: float = Field(default=300.0, gt=0)
    """How long a model call's tenant token is valid."""
    llm_rate_limit_max_wait_s: float = Field(default=120.0, ge=0)
    """A rate-limited model call is tried again after the proxy's Retry-After if that is at
    most this long (the event stream says why); else the task fails."""
    llm_max_connections: int = Field(default=4096, ge=1)
    """Connections to the model endpoint each process may hold open."""
    token_flush_s: float = Field(default=0.03, ge=0)
    """Model tokens reach the event stream in batches of this interval (0: each at once)."""
    agent_session_cache: int = Field(default=10_000, ge=0)
    """Warm sessions kept per process (a cache: Redis holds the truth)."""
    compaction_share: float = Field(default=0.8, gt=0, le=1)
    """Once a prompt would pass this share of the context window, the oldest turns are
    summarised by the model."""
    compaction_keep_share: float = Field(default=0.4, gt=0, lt=1)
    """The newest turns kept whole by a compaction, up to this share of the window."""
    default_context_window: int = Field(default=0, ge=0)
    """The context window when neither the spec nor the proxy's `/v1/models` gives one
    (0: none)."""


class OtlpSettings(Area):
    """Traces.

    OpenTelemetry, over OTLP/HTTP.
    """

    otlp_endpoint: HttpUrlOrEmpty = ""
    """The OTLP/HTTP endpoint traces go to (`http://collector:4318`); empty: no traces."""


class MetricsSettings(Area):
    """Metrics.

    The Celery workers' and beat's Prometheus metrics (the gateway and the proxy serve /metrics
    on their own port).
    """

    metrics_host: str = "127.0.0.1"
    """The address the workers' metrics server listens on."""
    metrics_port: int = Field(default=0, ge=0, le=65535)
    """The workers' metrics port (0: no metrics server)."""


class PluginSettings(Area):
    """Plugins.

    Your agents and actions, deployed by configuration.
    """

    plugin_modules: str = ""
    """Importable modules that register your agents and actions, comma-separated."""

    @field_validator("plugin_modules")
    @classmethod
    def _module_names(cls, value: str, info: ValidationInfo) -> str:
        check_module_names(value, variable(info))
        return value
