"""One settings module for every service: environment variables with the prefix ``TASKYARD_``.

Services reach settings through `get_settings()`, which tests override by setting the
environment before a process starts (or by calling `get_settings.cache_clear()`).
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Mapping
from functools import lru_cache
from typing import Annotated, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic import (
    Field,
    IPvAnyNetwork,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from redis.connection import parse_url

from shared.redis_clients import SentinelSpec

__all__ = [
    "HTTP_SCHEMES",
    "REDIS_SCHEMES",
    "RedisSentinelSettings",
    "Settings",
    "broker_database",
    "check_token_secret",
    "check_url",
    "env_name",
    "get_settings",
    "items",
    "parse_api_keys",
    "parse_credentials",
    "parse_sentinels",
]

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


def parse_sentinels(text: str) -> tuple[tuple[str, int], ...]:
    """(host, port) of each sentinel, from "host:port" entries separated by commas (an IPv6
    host in brackets: "[fd00::1]:26379"). The ValueError names the entry and the format."""
    form = (
        "TASKYARD_REDIS_SENTINELS must be host:port entries separated by commas "
        "(10.0.0.1:26379,10.0.0.2:26379)"
    )
    found = []
    for number, item in enumerate(items(text), 1):
        host, sep, port = item.rpartition(":")
        host = host.removeprefix("[").removesuffix("]")
        if not (sep and host and port.isdigit() and 0 < int(port) < 65536):
            raise ValueError(f"{form}; entry {number} ({item!r}) is not host:port")
        found.append((host, int(port)))
    return tuple(found)


class RedisSentinelSettings(BaseSettings):
    """Redis through Sentinel, for every settings class that reaches Redis: the sentinels
    (`redis_sentinels`, "host:port,...") and the name of the master they monitor
    (`redis_master`) name the server, over the host and port of every Redis URL; the URLs
    still give the database numbers and the password. Both set, or neither."""

    model_config = SettingsConfigDict(
        env_prefix="TASKYARD_", extra="ignore", frozen=True, hide_input_in_errors=True
    )

    redis_sentinels: str = ""
    redis_master: str = ""

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


class Settings(RedisSentinelSettings):
    # Inputs stay out of error messages: some are secrets.
    model_config = SettingsConfigDict(
        env_prefix="TASKYARD_", extra="ignore", frozen=True, hide_input_in_errors=True
    )

    # Redis: tasks, events and memory on one database, Celery's broker and results on others.
    # The broker must be on the store's server (see `broker_database`); unset, the broker and
    # the result backend follow `redis_url` onto its server's databases 1 and 2. With
    # Sentinel (`redis_sentinels`, `redis_master`) all three are on the master it names.
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
    # Shared by the agent workers and the proxy only (never the tool workers): each model call
    # carries a token signed with it naming the task's tenant, so the proxy counts and limits
    # the call as that tenant's (`shared.tenant_credentials`). Empty: calls carry `llm_api_key`
    # and the proxy sees one tenant. At least 32 characters (`openssl rand -hex 32`).
    llm_token_secret: SecretStr = SecretStr("")
    llm_token_ttl_s: float = Field(default=300.0, gt=0)
    # A rate-limited model call is tried again after the proxy's Retry-After if that is at
    # most this long (the task waits, and its event stream says why); else the task fails.
    llm_rate_limit_max_wait_s: float = Field(default=120.0, ge=0)

    # Gateway: a request body over this many bytes is refused (413) before it is read.
    gateway_max_body_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    # Gateway: a task's event stream that has been quiet this long gets a keep-alive comment
    # (proxies close idle connections; clients must ignore it, as the SSE specification says).
    gateway_sse_keep_alive_s: float = Field(default=15.0, gt=0)
    # What a 202 promises (docs/deployment.md): the gateway answers it once this many replicas
    # hold the task (Redis WAIT), else 503 with Retry-After after `gateway_accept_wait_ms`.
    # Unset: 1 under Sentinel (a failover then loses no accepted task), 0 without (the
    # primary's AOF alone; `accept_replicas`).
    gateway_accept_replicas: int | None = Field(default=None, ge=0)
    gateway_accept_wait_ms: int = Field(default=500, ge=1)

    # Tasks.
    default_max_steps: int = Field(default=8, ge=1)
    task_deadline_s: float = 600.0

    # The sweep (Celery beat, every `sweep_interval_s`): a live task that has not moved for
    # `stall_s` has what it waits on sent again; a task past its deadline ends timed_out.
    # `stall_s` must exceed the longest legitimate step (a model call's timeout, a cell's).
    sweep_interval_s: float = Field(default=30.0, gt=0)
    stall_s: float = Field(default=300.0, gt=0)

    # Cron schedules (Celery beat sends their job every `schedule_tick_s`): a run whose time
    # passed more than `schedule_grace_s` ago was missed (beat was down), and the schedule's
    # `missed` policy says whether it runs once late or is skipped. A cron may fire at most
    # every `schedule_min_interval_s` (a six-field cron has seconds); a tenant has at most
    # `schedules_max_per_tenant` schedules; each keeps its latest `schedule_runs_kept` runs.
    schedule_tick_s: float = Field(default=10.0, gt=0)
    schedule_grace_s: float = Field(default=60.0, gt=0)
    schedule_min_interval_s: float = Field(default=60.0, gt=0)
    schedules_max_per_tenant: int = Field(default=100, ge=1)
    schedule_runs_kept: int = Field(default=100, ge=1)

    # Memory compaction: once a step's prompt would pass `compaction_share` of the model's
    # context window, the oldest turns are summarised (by the model) and the newest kept,
    # up to `compaction_keep_share` of the window. The window comes from the spec, else the
    # proxy's /v1/models (vLLM's `max_model_len`), else `default_context_window` (0: none).
    compaction_share: float = Field(default=0.8, gt=0, le=1)
    compaction_keep_share: float = Field(default=0.4, gt=0, lt=1)
    default_context_window: int = Field(default=0, ge=0)

    # Webhooks: each attempt waits `webhook_timeout_s`; failures retry from
    # `webhook_retry_base_s`, doubling up to `webhook_retry_max_s`, for `webhook_retry_for_s`.
    # Private, loopback and link-local receivers are refused unless `webhook_allow_private`
    # (tests, a laptop).
    webhook_allow_private: bool = False
    webhook_timeout_s: float = Field(default=10.0, gt=0)
    webhook_retry_base_s: float = Field(default=2.0, gt=0)
    webhook_retry_max_s: float = Field(default=3600.0, gt=0)
    webhook_retry_for_s: float = Field(default=24 * 3600.0, gt=0)

    # Agent workers: model tokens reach the event stream in batches of this interval (0: each
    # at once); warm sessions kept per process; connections each process may hold open.
    token_flush_s: float = Field(default=0.03, ge=0)
    agent_session_cache: int = Field(default=10_000, ge=0)
    llm_max_connections: int = Field(default=4096, ge=1)
    redis_max_connections: int = Field(default=64, ge=2)
    # Celery's broker connections per worker process: at least the worker's concurrency.
    broker_max_connections: int = Field(default=2048, ge=10)
    # Celery's own INFO line for each job received and each job that succeeded (two lines per
    # job, about 30 us of CPU per job): off unless asked for. Retries, failures
    # and taskyard's own lines are logged either way.
    celery_job_logs: bool = False

    # Sandboxes.
    sandbox_backend: str = "docker"  # a key of shared.sandbox.BACKENDS: "docker" or "local"
    sandbox_image: str = "taskyard/sandbox:latest"
    sandbox_timeout_s: float = 30.0
    # How long an interrupted cell may take to stop before its kernel is replaced.
    sandbox_interrupt_grace_s: float = Field(default=2.0, gt=0)
    sandbox_memory: str = "256m"
    sandbox_pids: int = 64
    sandbox_cpus: float = 1.0
    sandbox_idle_s: float = 600.0
    sandbox_disk: str = "64m"  # size of each tmpfs (/work, /tmp, /dev/shm) inside a sandbox
    # Docker backend: the engine's OCI runtime for sandboxes, "runc" or "runsc" (gVisor: its
    # own kernel in user space between the cells and the host's); registered with the engine.
    sandbox_runtime: str = Field(default="runc", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    # The warm pool of started kernels: at least `sandbox_warm_pool` (0: no pool), growing to
    # the busiest second of new sessions in the last `sandbox_warm_window_s`, up to
    # `sandbox_warm_pool_max`; `sandbox_warm_starts` kernels start at once.
    sandbox_warm_pool: int = Field(default=1, ge=0)
    sandbox_warm_pool_max: int = Field(default=24, ge=0)
    sandbox_warm_starts: int = Field(default=4, ge=1)
    sandbox_warm_window_s: float = Field(default=60.0, gt=0)
    sandbox_max_per_tenant: int = Field(default=16, ge=1)  # live sandboxes of one tenant
    sandbox_max_per_worker: int = Field(default=32, ge=1)  # live sandboxes of one tool worker
    # Marks this worker's sandboxes; at start it removes every one left under the same label
    # and its own Celery node name (several workers may share a label and an engine).
    sandbox_worker_label: str = Field(default_factory=socket.gethostname, min_length=1)
    # A tool worker holding sessions' interpreters says it lives every `tool_worker_beat_s`;
    # silent for `tool_worker_dead_s`, it is gone: its sessions' next calls run elsewhere and
    # say the state was lost, and the sweep moves the jobs on its own queue to the pool.
    tool_worker_beat_s: float = Field(default=2.0, gt=0)
    tool_worker_dead_s: float = Field(default=10.0, gt=0)
    # Local backend: the cgroup (path in the hierarchy) to make per-sandbox cgroups under;
    # empty: the worker's own.
    sandbox_cgroup_parent: str = ""

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

    # MCP servers a task's spec names (`AgentSpec.mcp_servers`). The tool worker reaches remote
    # ones through the web tool's request guard: public addresses only, unless allowed here.
    mcp_allow_private: bool = False  # true: any address (tests, a laptop); never in production
    mcp_allow_networks: Annotated[tuple[IPvAnyNetwork, ...], NoDecode] = ()  # as browse_'s
    mcp_timeout_s: float = Field(default=60.0, gt=0)  # one call or listing, connecting included
    mcp_max_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)  # one answer of a server
    mcp_max_chars: int = Field(default=50_000, ge=100)  # text of one result the model reads
    mcp_tools_ttl_s: int = Field(default=300, ge=1)  # a server's tool listing, kept in Redis
    # Remote servers' credentials, per tenant, as JSON: {"tenant": {"name": "token"}}. A server
    # whose `credential` is "name" gets `Authorization: Bearer <token>` from the tool worker;
    # neither the model, the task's messages nor the sandbox ever see it.
    mcp_credentials: SecretStr = SecretStr("")

    # Session files (gateway <-> tool worker): the largest file uploaded or downloaded; what a
    # session's working directory may hold after an upload (and stage in Redis at once); how
    # long the gateway waits for the tool worker that holds the session's sandbox.
    files_max_bytes: int = Field(default=16 * 1024 * 1024, ge=1)
    files_session_max_bytes: int = Field(default=48 * 1024 * 1024, ge=1)
    files_timeout_s: float = Field(default=60.0, gt=0)

    # Artifacts (figures, tables a task's tools made): kept in the artifact store tool workers
    # write and gateways read, a key of shared.files.artifacts.BACKENDS: "redis" (the store's
    # Redis) or "s3" (an S3-compatible object store); at most `artifacts_max_bytes` each (the
    # kernel's own cap on a cell's rich outputs is 2 MiB) and `artifacts_task_max_bytes` per
    # task. They expire with the task's tool results (shared.task.RETENTION_S, 7 days).
    artifacts_backend: str = "redis"
    artifacts_max_bytes: int = Field(default=2 * 1024 * 1024, ge=1)
    artifacts_task_max_bytes: int = Field(default=64 * 1024 * 1024, ge=1)
    # The s3 backend: its bucket, the key prefix of its objects, the endpoint (empty: AWS S3)
    # and region (empty: the AWS configuration's). Credentials come from the standard AWS chain
    # (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, an instance or task role).
    artifacts_s3_bucket: str = ""
    artifacts_s3_prefix: str = "taskyard/artifacts/"
    artifacts_s3_endpoint_url: str = ""
    artifacts_s3_region: str = ""

    # Where user-defined agents and actions live: comma-separated importable module names.
    plugin_modules: str = ""

    # Observability. Celery workers and beat serve Prometheus metrics on this address (port 0:
    # none); the gateway and the proxy serve /metrics on their own port.
    metrics_host: str = "127.0.0.1"
    metrics_port: int = Field(default=0, ge=0, le=65535)
    # OpenTelemetry traces go to this OTLP/HTTP endpoint (http://collector:4318); empty: off.
    otlp_endpoint: str = ""

    @field_validator("api_keys")
    @classmethod
    def _key_tenant_pairs(cls, value: str) -> str:
        parse_api_keys(value)
        return value

    @field_validator("llm_token_secret")
    @classmethod
    def _token_secret(cls, value: SecretStr, info: ValidationInfo) -> SecretStr:
        check_token_secret(value, _env(info))
        return value

    @field_validator("redis_url", "broker_url", "result_backend")
    @classmethod
    def _redis_url(cls, value: str, info: ValidationInfo) -> str:
        check_url(value, REDIS_SCHEMES, _env(info), host=False)
        return value

    @field_validator("llm_base_url", "search_url")
    @classmethod
    def _http_url(cls, value: str, info: ValidationInfo) -> str:
        check_url(value, HTTP_SCHEMES, _env(info))
        return value

    @field_validator("otlp_endpoint", "artifacts_s3_endpoint_url")
    @classmethod
    def _optional_http_url(cls, value: str, info: ValidationInfo) -> str:
        if value:
            check_url(value, HTTP_SCHEMES, _env(info))
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

    @field_validator("mcp_credentials")
    @classmethod
    def _credentials(cls, value: SecretStr, info: ValidationInfo) -> SecretStr:
        parse_credentials(value, _env(info))
        return value

    @field_validator("browse_allow_networks", "mcp_allow_networks", mode="before")
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
        urls = {"redis_url": self.redis_url, "broker_url": self.broker_url,
                "result_backend": self.result_backend}  # fmt: skip
        self.check_sentinel_urls(urls)
        broker_database(self.redis_url, self.broker_url, sentinel=self.sentinel is not None)
        return self

    @property
    def accept_replicas(self) -> int:
        """How many replicas must hold a task before the gateway answers 202."""
        if self.gateway_accept_replicas is not None:
            return self.gateway_accept_replicas
        return 1 if self.redis_master.strip() else 0  # under Sentinel (both or neither are set)

    @model_validator(mode="after")
    def _s3_needs_a_bucket(self) -> Settings:
        if self.artifacts_backend == "s3" and not self.artifacts_s3_bucket:
            bucket = env_name("artifacts_s3_bucket")
            raise ValueError(f"TASKYARD_ARTIFACTS_BACKEND=s3 needs {bucket} (the bucket's name)")
        return self

    def tenants_by_key(self) -> dict[str, str]:
        """API key to tenant name."""
        return parse_api_keys(self.api_keys)

    def mcp_credential(self, tenant: str, name: str) -> str | None:
        """The tenant's credential `name` for MCP servers, if the operator configured it."""
        return parse_credentials(self.mcp_credentials, env_name("mcp_credentials")).get(
            (tenant, name)
        )


REDIS_SCHEMES = ("redis", "rediss", "unix", "redis+socket", "sentinel")
HTTP_SCHEMES = ("http", "https")


def _env(info: ValidationInfo) -> str:
    return env_name(info.field_name or "")


def items(text: str) -> list[str]:
    """The non-empty, stripped items of a comma-separated setting."""
    return [item.strip() for item in text.split(",") if item.strip()]


def check_url(value: str, schemes: tuple[str, ...], where: str, host: bool = True) -> None:
    """Refuse a URL outside `schemes` or without a host (`host`), naming `where` it came from."""
    parts = urlsplit(value)
    if parts.scheme not in schemes or not (parts.netloc or (not host and parts.path)):
        raise ValueError(
            f"{where} needs a URL starting with {' or '.join(s + '://' for s in schemes)}"
        )  # the value is not repeated: a URL may hold a password


def parse_credentials(value: SecretStr, where: str) -> dict[tuple[str, str], str]:
    """(tenant, name) to token, from JSON ``{"tenant": {"name": "token"}}`` ("" is none). The
    ValueError says what is wrong without repeating a token."""
    text = value.get_secret_value().strip()
    if not text:
        return {}
    form = f'{where} must be JSON: {{"tenant": {{"credential name": "token"}}}}'
    try:
        tenants = json.loads(text)
    except ValueError:
        raise ValueError(f"{form}; it is not JSON") from None
    if not isinstance(tenants, dict):
        raise ValueError(form)
    found: dict[tuple[str, str], str] = {}
    for tenant, named in tenants.items():
        if not isinstance(named, dict):
            raise ValueError(f"{form}; tenant {tenant!r} maps to no object")
        for name, token in named.items():
            if not (isinstance(token, str) and token.strip()):
                raise ValueError(f"{form}; {tenant!r}/{name!r} is not a non-empty string")
            found[tenant, name] = token.strip()
    return found


def check_token_secret(value: SecretStr, where: str) -> None:
    """Refuse a tenant-token secret that is short or a placeholder (empty is allowed: off)."""
    secret = value.get_secret_value()
    if secret and (len(secret) < 32 or secret.lower() in _PLACEHOLDER_KEYS):
        raise ValueError(
            f"{where} must be at least 32 characters and not a placeholder "
            "(openssl rand -hex 32), or empty to leave tenant tokens off"
        )


def _on_db(url: str, db: int) -> str:
    """`url` with its database number replaced by `db`."""
    parts = urlsplit(url)
    if parts.scheme == "unix":  # the database is a query parameter there
        query = [(k, v) for k, v in parse_qsl(parts.query) if k != "db"] + [("db", str(db))]
        return f"unix://{parts.path}?{urlencode(query)}"
    return urlunsplit(parts._replace(path=f"/{db}"))


def broker_database(store_url: str, broker_url: str, sentinel: bool = False) -> int:
    """The broker's database number, checked to be on the store's Redis server: a commit and
    the jobs it starts are one atomic write (see `shared.jobs`). Under Sentinel both are on
    the master it names, whatever the URLs' hosts say."""
    store, broker = parse_url(store_url), parse_url(broker_url)
    if sentinel:
        return int(broker.get("db", 0))
    if any(store.get(k) != broker.get(k) for k in ("host", "port", "path")):
        raise ValueError(
            "TASKYARD_BROKER_URL must be on the same Redis server as TASKYARD_REDIS_URL "
            "(another database number is fine): a step's commit and the jobs it starts are "
            "one atomic write"
        )
    return int(broker.get("db", 0))


@lru_cache
def get_settings() -> Settings:
    return Settings()
