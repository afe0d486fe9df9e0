"""The proxy's settings: its own pydantic-settings class, read from `TASKYARD_*` variables.

Only what the proxy reads; the variables it shares with other services (`TASKYARD_REDIS_URL`,
`TASKYARD_LLM_API_KEY`, `TASKYARD_LLM_TOKEN_SECRET`, `TASKYARD_OTLP_ENDPOINT`) keep their names
and checks (`shared.settings`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from services.llm_proxy.limits.tenants import parse_limits
from shared.settings import (
    HTTP_SCHEMES,
    REDIS_SCHEMES,
    RedisSentinelSettings,
    check_token_secret,
    check_url,
    env_name,
    items,
)

__all__ = ["ProxySettings", "get_proxy_settings"]


class ProxySettings(RedisSentinelSettings):
    """What the proxy reads from `TASKYARD_*` variables: its own knobs and the few it shares
    with other services (the same variable names as theirs)."""

    # Inputs stay out of error messages: some are secrets.
    model_config = SettingsConfigDict(
        env_prefix="TASKYARD_", extra="ignore", frozen=True, hide_input_in_errors=True
    )

    # Shared with other services: Redis (the rate-limit sync; Sentinel's `redis_sentinels` and
    # `redis_master` too), the API key direct callers use when no keys are configured, the
    # tenant-token secret the agent workers sign with, and where traces go.
    redis_url: str = "redis://127.0.0.1:6379/0"
    llm_api_key: str = "taskyard"
    llm_token_secret: SecretStr = SecretStr("")
    otlp_endpoint: str = ""

    # Upstreams as "url" or "model=url" separated by commas, or a YAML pool file.
    proxy_upstreams: str = "http://127.0.0.1:8500/v1"
    proxy_pool_file: str | None = None
    proxy_host: str = "127.0.0.1"
    proxy_port: int = 8400
    # "affinity" (session / prefix consistent hashing with bounded load), "round_robin",
    # or "least_outstanding".
    proxy_policy: Literal["affinity", "round_robin", "least_outstanding"] = "affinity"
    # Bounded load: a replica takes a hashed request while its load is under this factor of
    # the mean; past it the request goes to the next replica on the ring.
    proxy_load_factor: float = Field(default=1.25, gt=1.0)
    # A replica whose time to first byte is past this factor of the others' median loses its
    # affinity traffic until it recovers; 0 turns that off.
    proxy_slow_factor: float = Field(default=4.0, ge=0)
    # A routing key (session or prompt prefix) keeps its replica while it was seen within this
    # many seconds; new keys go where few live keys are.
    proxy_key_live_s: float = Field(default=60.0, gt=0)
    proxy_prefix_chars: int = Field(default=256, ge=16)
    proxy_max_in_flight: int = Field(default=256, ge=1)
    proxy_fallbacks: str = ""  # "modelA=modelB|modelC,modelX=modelY"
    proxy_max_retries: int = Field(default=2, ge=0)
    proxy_connect_timeout_s: float = 2.0
    proxy_read_timeout_s: float = 120.0  # longest silence from an upstream mid-request
    proxy_queue_size: int = Field(default=1024, ge=0)
    proxy_queue_timeout_s: float = 10.0
    proxy_max_body_bytes: int = 8 * 1024 * 1024
    proxy_drain_s: float = 10.0  # on SIGTERM, how long requests in progress may take to end
    # Health: probe period, passive ejection threshold and the cooldown that doubles.
    proxy_probe_interval_s: float = 2.0
    proxy_probe_timeout_s: float = 1.0
    proxy_eject_after: int = Field(default=3, ge=1)
    proxy_cooldown_s: float = 1.0
    proxy_max_cooldown_s: float = 60.0
    # Plain API keys for direct use: "key", "key:rpm:tpm" or "key:rpm:tpm:tenant"
    # comma-separated (0 = unlimited). Empty, and no `llm_token_secret`: only `llm_api_key`
    # is accepted, without limits. The agent workers' calls carry tenant tokens instead.
    proxy_keys: str = ""
    proxy_require_key: bool = True
    # The limits of tenants whose calls carry tenant tokens: "tenant:rpm:tpm" comma-separated,
    # "*:rpm:tpm" for every tenant not named (0 = unlimited; unnamed and no "*": unlimited).
    proxy_tenant_limits: str = ""
    proxy_rate_window_s: float = Field(default=60.0, gt=0)  # rpm/tpm count per window
    # Redis sync for rate-limit buckets, off the request path. The URL defaults to
    # `redis_url` (under Sentinel, like it, it gives only a database number and the password).
    proxy_redis_sync: bool = True
    proxy_redis_url: str | None = None
    proxy_sync_interval_s: float = 0.5
    # Affinity routing shares placements and replica load with the other proxy instances
    # through the same Redis (needs `proxy_redis_sync`), off the request path: every
    # `proxy_placement_sync_s` each instance publishes what it placed and its per-replica load,
    # and reads the others'. An instance's load counts for `proxy_placement_ttl_s` after it
    # last published (a stopped instance's load stops counting); placements live for
    # `proxy_key_live_s` after their last use by any instance.
    proxy_share_placements: bool = True
    proxy_placement_sync_s: float = Field(default=0.1, gt=0, le=5.0)
    proxy_placement_ttl_s: float = Field(default=5.0, gt=0)

    @model_validator(mode="after")
    def _placement_ttl(self) -> ProxySettings:
        if self.proxy_placement_ttl_s < 2 * self.proxy_placement_sync_s:
            raise ValueError(
                "TASKYARD_PROXY_PLACEMENT_TTL_S must be at least twice "
                "TASKYARD_PROXY_PLACEMENT_SYNC_S, or live instances would drop out between syncs"
            )
        return self

    @field_validator("redis_url", "proxy_redis_url")
    @classmethod
    def _redis_url(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None:
            check_url(value, REDIS_SCHEMES, env_name(info.field_name or ""), host=False)
        return value

    @model_validator(mode="after")
    def _urls_under_sentinel(self) -> ProxySettings:
        self.check_sentinel_urls(
            {"redis_url": self.redis_url, "proxy_redis_url": self.proxy_redis_url}
        )
        return self

    @field_validator("otlp_endpoint")
    @classmethod
    def _otlp_url(cls, value: str) -> str:
        if value:
            check_url(value, HTTP_SCHEMES, "TASKYARD_OTLP_ENDPOINT")
        return value

    @field_validator("llm_token_secret")
    @classmethod
    def _token_secret(cls, value: SecretStr) -> SecretStr:
        check_token_secret(value, "TASKYARD_LLM_TOKEN_SECRET")
        return value

    @field_validator("proxy_upstreams")
    @classmethod
    def _upstream_list(cls, value: str) -> str:
        where = "TASKYARD_PROXY_UPSTREAMS (url or model=url, separated by commas)"
        for entry in items(value):
            model, url = entry.split("=", 1) if "=" in entry.split("://")[0] else ("*", entry)
            if not model.strip():
                raise ValueError(f"{where}: an entry has no model before its '='")
            check_url(url.strip(), HTTP_SCHEMES, where)
        return value

    @field_validator("proxy_keys")
    @classmethod
    def _key_entries(cls, value: str) -> str:
        for number, entry in enumerate(items(value), 1):
            key, *rest = entry.split(":")
            if not key or len(rest) > 3 or not all(n.isdigit() for n in rest[:2] if n):
                raise ValueError(  # the entry is not repeated: it holds a key
                    f"TASKYARD_PROXY_KEYS: entry {number} is not key, key:rpm:tpm or "
                    "key:rpm:tpm:tenant (rpm and tpm whole numbers, 0 for no limit)"
                )
        return value

    @field_validator("proxy_tenant_limits")
    @classmethod
    def _limit_entries(cls, value: str) -> str:
        parse_limits(value)
        return value

    @field_validator("proxy_fallbacks")
    @classmethod
    def _fallback_entries(cls, value: str) -> str:
        for entry in items(value):
            model, sep, targets = entry.partition("=")
            if not (sep and model.strip() and all(t.strip() for t in targets.split("|"))):
                raise ValueError(
                    "TASKYARD_PROXY_FALLBACKS must be model=fallback|fallback entries separated "
                    f"by commas (big=small|tiny); not {entry!r}"
                )
        return value


@lru_cache
def get_proxy_settings() -> ProxySettings:
    """The process's proxy settings, read once from the environment."""
    return ProxySettings()
