"""The settings areas of what tool calls use: sandboxes, web search and pages, MCP servers,
session files and artifacts. Read by the tool worker; the gateway reads files and artifacts,
the agent worker MCP listings."""

from __future__ import annotations

import socket
from typing import Annotated, Any

from pydantic import (
    Field,
    IPvAnyNetwork,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import NoDecode

from taskyard.plumbing.settings.areas import Area, RedisSettings
from taskyard.plumbing.settings.checks import (
    HttpUrl,
    HttpUrlOrEmpty,
    check_size,
    env_name,
    parse_credentials,
    split_networks,
    variable,
)

__all__ = [
    "ArtifactSettings",
    "FileSettings",
    "McpListingSettings",
    "McpSettings",
    "SandboxSettings",
    "WebSettings",
]

Networks = Annotated[tuple[IPvAnyNetwork, ...], NoDecode]


class SandboxSettings(Area):
    """Sandboxes.

    One interpreter per session. The docker backend under runc can hold up to
    `sandbox_sessions_per_container` sessions of one tenant per container, each a fork of a
    pre-imported interpreter walled off in namespaces of its own, with the memory, pids and
    disk limits each; otherwise one container per session. A warm pool of started containers
    grows from `sandbox_warm_pool` to the busiest second of new sessions (or hosts) in the
    last `sandbox_warm_window_s`, up to `sandbox_warm_pool_max`.
    """

    sandbox_backend: str = "docker"
    """A key of `taskyard.sandbox.BACKENDS`: `docker`, or `local` (weaker isolation)."""
    sandbox_image: str = "taskyard/sandbox:latest"
    """The sandbox image (docker backend)."""
    sandbox_timeout_s: float = 30.0
    """How long one cell may run before it is interrupted."""
    sandbox_interrupt_grace_s: float = Field(default=2.0, gt=0)
    """How long an interrupted cell may take to stop before its kernel is replaced."""
    sandbox_memory: str = "256m"
    """Memory of one session's sandbox (bytes, or with k, m, g)."""
    sandbox_pids: int = 64
    """Processes one session's sandbox may run."""
    sandbox_cpus: float = 1.0
    """CPUs one sandbox container may use (all its sessions together)."""
    sandbox_sessions_per_container: int = Field(default=64, ge=1)
    """Sessions of one tenant one container holds, forked from its pre-imported fork server
    (docker backend under runc). 1, and under runsc: one container per session."""
    sandbox_idle_s: float = 600.0
    """A session's sandbox idle this long is reaped."""
    sandbox_disk: str = "64m"
    """Size of a session's /work (one container per session: of each of its tmpfs)."""
    sandbox_runtime: str = Field(default="runc", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    """The engine's OCI runtime for sandboxes: `runc`, or `runsc` (gVisor: its own kernel in
    user space between the cells and the host's), registered with the engine."""
    sandbox_warm_pool: int = Field(default=1, ge=0)
    """Started kernels kept waiting, at least (0: no pool)."""
    sandbox_warm_pool_max: int = Field(default=24, ge=0)
    """The most the warm pool grows to."""
    sandbox_warm_starts: int = Field(default=4, ge=1)
    """Kernels started at once to fill the pool."""
    sandbox_warm_window_s: float = Field(default=60.0, gt=0)
    """The window whose busiest second of new sessions sizes the pool."""
    sandbox_max_per_tenant: int = Field(default=256, ge=1)
    """Live sessions' sandboxes of one tenant on one tool worker."""
    sandbox_max_per_worker: int = Field(default=512, ge=1)
    """Live sessions' sandboxes of one tool worker."""
    sandbox_engine_token: SecretStr = SecretStr("")
    """This worker's token for the engine proxy its `DOCKER_HOST` names (one of
    `ENGINE_PROXY_CALLERS`); empty: none, for an engine reached without a proxy."""
    sandbox_worker_label: str = Field(default_factory=socket.gethostname, min_length=1)
    """Marks this worker's sandboxes (default: the host's name); at start it removes every
    one left under the same label and its own Celery node name."""
    tool_worker_beat_s: float = Field(default=2.0, gt=0)
    """A tool worker holding sessions' interpreters says it lives this often."""
    tool_worker_dead_s: float = Field(default=10.0, gt=0)
    """Silent this long, a tool worker is gone: its sessions' next calls run elsewhere and say
    the state was lost."""
    sandbox_cgroup_parent: str = ""
    """Local backend: the cgroup to make per-sandbox cgroups under; empty: the worker's own."""

    @field_validator("sandbox_memory", "sandbox_disk")
    @classmethod
    def _docker_size(cls, value: str, info: ValidationInfo) -> str:
        check_size(value, variable(info))
        return value


class WebSettings(RedisSettings):
    """Web search and pages.

    A SearxNG-compatible JSON search API, and page reads through the server-side request guard;
    each session's results and pages are kept in Redis.
    """

    search_url: HttpUrl = "http://127.0.0.1:8888"
    """The search API (`GET {url}/search?q=..&format=json`)."""
    search_engines: str = ""
    """SearxNG engine names, comma-separated; empty: the instance's own."""
    search_timeout_s: float = 15.0
    """How long one search may take."""
    search_top_k: int = Field(default=5, ge=1, le=50)
    """Results shown per search."""
    search_results_ttl_s: int = Field(default=3600, ge=1)
    """How long a session's results are kept."""
    browse_allow_private: bool = False
    """Open any address (tests, a laptop); never in production."""
    browse_allow_networks: Networks = ()
    """Private networks opened all the same, comma-separated CIDRs (`10.20.0.0/16`)."""
    browse_timeout_s: float = Field(default=15.0, gt=0)
    """How long a whole page read may take, redirects included."""
    browse_max_bytes: int = Field(default=2 * 1024 * 1024, ge=1024)
    """Bytes of a page's body read; the rest is cut."""
    browse_max_chars: int = Field(default=8000, ge=100)
    """Page text shown per opened page."""
    browse_cache_ttl_s: int = Field(default=3600, ge=1)
    """How long a session's opened pages are kept."""

    @field_validator("browse_allow_networks", mode="before")
    @classmethod
    def _browse_networks(cls, value: Any) -> Any:
        return split_networks(value)


class McpListingSettings(Area):
    """MCP listings.

    MCP servers' tool listings, which both workers wait on.
    """

    mcp_timeout_s: float = Field(default=60.0, gt=0)
    """How long one call or listing of an MCP server may take, connecting included."""
    mcp_tools_ttl_s: int = Field(default=300, ge=1)
    """How long a server's tool listing is kept in Redis."""


class McpSettings(McpListingSettings):
    """MCP servers.

    The servers a task's spec names: the tool worker reaches remote ones through the web tool's
    request guard, public addresses only unless allowed here.
    """

    mcp_allow_private: bool = False
    """Reach MCP servers at any address (tests, a laptop); never in production."""
    mcp_allow_networks: Networks = ()
    """Private networks MCP servers may be on all the same, comma-separated CIDRs."""
    mcp_max_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    """Bytes of one answer of a server."""
    mcp_max_chars: int = Field(default=50_000, ge=100)
    """Text of one result the model reads."""
    mcp_credentials: SecretStr = SecretStr("")
    """Remote servers' credentials per tenant, JSON `{"tenant": {"name": "token"}}`: a server
    whose `credential` is `name` gets `Authorization: Bearer <token>`, seen by no model, task
    message or sandbox."""

    @field_validator("mcp_allow_networks", mode="before")
    @classmethod
    def _mcp_networks(cls, value: Any) -> Any:
        return split_networks(value)

    @field_validator("mcp_credentials")
    @classmethod
    def _credentials(cls, value: SecretStr, info: ValidationInfo) -> SecretStr:
        parse_credentials(value, variable(info))
        return value

    def mcp_credential(self, tenant: str, name: str) -> str | None:
        """The tenant's credential `name` for MCP servers, if the operator configured it."""
        return parse_credentials(self.mcp_credentials, env_name("mcp_credentials")).get(
            (tenant, name)
        )


class FileSettings(Area):
    """Session files.

    Between the gateway and the tool worker holding the session's sandbox.
    """

    files_max_bytes: int = Field(default=16 * 1024 * 1024, ge=1)
    """The largest file uploaded or downloaded."""
    files_session_max_bytes: int = Field(default=48 * 1024 * 1024, ge=1)
    """What a session's working directory may hold after an upload (staged in Redis at
    once)."""
    files_timeout_s: float = Field(default=60.0, gt=0)
    """How long the gateway waits for the tool worker that holds the session's sandbox."""


class ArtifactSettings(RedisSettings):
    """Artifacts.

    Figures and tables a task's tools made, written by tool workers and read by gateways; they
    expire with the task's tool results (7 days). S3 credentials come from the standard AWS
    chain.
    """

    artifacts_backend: str = "redis"
    """A key of `taskyard.files.artifacts.BACKENDS`: `redis` (the store's Redis) or `s3` (an
    S3-compatible object store)."""
    artifacts_max_bytes: int = Field(default=2 * 1024 * 1024, ge=1)
    """The largest artifact (a kernel caps a cell's rich outputs at 2 MiB)."""
    artifacts_task_max_bytes: int = Field(default=64 * 1024 * 1024, ge=1)
    """Artifacts of one task, together."""
    artifacts_s3_bucket: str = ""
    """The s3 backend's bucket."""
    artifacts_s3_prefix: str = "taskyard/artifacts/"
    """The key prefix of the s3 backend's objects."""
    artifacts_s3_endpoint_url: HttpUrlOrEmpty = ""
    """The s3 backend's endpoint; empty: AWS S3."""
    artifacts_s3_region: str = ""
    """The s3 backend's region; empty: the AWS configuration's."""

    @model_validator(mode="after")
    def _s3_needs_a_bucket(self) -> ArtifactSettings:
        if self.artifacts_backend == "s3" and not self.artifacts_s3_bucket:
            bucket = env_name("artifacts_s3_bucket")
            raise ValueError(f"TASKYARD_ARTIFACTS_BACKEND=s3 needs {bucket} (the bucket's name)")
        return self
