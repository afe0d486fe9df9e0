"""The proxy's settings: its own pydantic-settings class, read from `TASKYARD_*` variables.

Only what the proxy reads; the variables it shares with other services keep their names and
checks: Sentinel's, the tenant-token secret and traces by reusing the shared areas
(`taskyard.plumbing.settings`), `TASKYARD_REDIS_URL` and `TASKYARD_LLM_API_KEY` declared again (the
shared areas holding them carry fields the proxy does not read).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from services.llm_proxy.limits.tenants import parse_limits
from taskyard.plumbing.settings import (
    HTTP_SCHEMES,
    REDIS_SCHEMES,
    OtlpSettings,
    RedisSentinelSettings,
    TenantTokenSettings,
    check_url,
    env_name,
    items,
)

__all__ = ["ProxySettings", "get_proxy_settings"]


class ProxySettings(RedisSentinelSettings, TenantTokenSettings, OtlpSettings):
    """LLM proxy.

    Its own knobs (see docs/llm-proxy.md); it also reads the shared variables the tables above
    mark "proxy".
    """

    # The store's Redis and the direct callers' key, declared again with the shared names and
    # defaults: the shared areas holding them carry fields the proxy does not read.
    redis_url: str = "redis://127.0.0.1:6379/0"
    """The store's Redis (the rate-limit sync's, unless `PROXY_REDIS_URL`)."""
    llm_api_key: str = "taskyard"
    """The API key direct callers use when no keys are configured."""

    proxy_upstreams: str = "http://127.0.0.1:8500/v1"
    """Upstreams as `url` or `model=url`, comma-separated."""
    proxy_pool_file: str | None = None
    """A YAML pool file instead of `PROXY_UPSTREAMS`."""
    proxy_host: str = "127.0.0.1"
    """The address the proxy listens on."""
    proxy_port: int = 8400
    """The port the proxy listens on."""
    proxy_policy: Literal["affinity", "round_robin", "least_outstanding"] = "affinity"
    """`affinity` (session / prefix consistent hashing with bounded load), `round_robin` or
    `least_outstanding`."""
    proxy_load_factor: float = Field(default=1.25, gt=1.0)
    """Bounded load: a replica takes a hashed request while its load is under this factor of
    the mean; past it the request goes to the next replica on the ring."""
    proxy_slow_factor: float = Field(default=4.0, ge=0)
    """A replica whose time to first byte is past this factor of the others' median loses
    its affinity traffic until it recovers (0: off)."""
    proxy_key_live_s: float = Field(default=60.0, gt=0)
    """A routing key (session or prompt prefix) keeps its replica while seen within this
    long; new keys go where few live keys are."""
    proxy_prefix_chars: int = Field(default=256, ge=16)
    """Characters of the prompt's start that key affinity when a call names no session."""
    proxy_max_in_flight: int = Field(default=256, ge=1)
    """Requests one replica serves at once."""
    proxy_fallbacks: str = ""
    """Fallback model groups: `modelA=modelB|modelC,modelX=modelY`."""
    proxy_max_retries: int = Field(default=2, ge=0)
    """Retries on another replica before the first byte."""
    proxy_connect_timeout_s: float = 2.0
    """How long connecting to an upstream may take."""
    proxy_read_timeout_s: float = 120.0
    """The longest silence from an upstream mid-request."""
    proxy_queue_size: int = Field(default=1024, ge=0)
    """Requests waiting for a free replica, at most."""
    proxy_queue_timeout_s: float = 10.0
    """How long a request may wait in the queue."""
    proxy_max_body_bytes: int = 8 * 1024 * 1024
    """The largest request body."""
    proxy_drain_s: float = 10.0
    """On SIGTERM, how long requests in progress may take to end."""
    proxy_probe_interval_s: float = 2.0
    """Health: how often each replica is probed."""
    proxy_probe_timeout_s: float = 1.0
    """Health: how long a probe may take."""
    proxy_eject_after: int = Field(default=3, ge=1)
    """Health: failures in a row that eject a replica."""
    proxy_cooldown_s: float = 1.0
    """Health: an ejected replica's first cooldown, doubling on each ejection."""
    proxy_max_cooldown_s: float = 60.0
    """Health: the longest cooldown."""
    proxy_keys: str = ""
    """API keys for direct use: `key`, `key:rpm:tpm` or `key:rpm:tpm:tenant`, comma-separated
    (0: unlimited). Empty, and no `LLM_TOKEN_SECRET`: only `LLM_API_KEY`, without limits."""
    proxy_require_key: bool = True
    """Refuse unknown keys; false: they pass as tenant `anonymous`."""
    proxy_tenant_limits: str = ""
    """Limits of tenants whose calls carry tenant tokens: `tenant:rpm:tpm`, comma-separated,
    `*:rpm:tpm` for every tenant not named (0, or unnamed without `*`: unlimited)."""
    proxy_rate_window_s: float = Field(default=60.0, gt=0)
    """The window rpm and tpm count over."""
    proxy_redis_sync: bool = True
    """Share rate-limit spending through Redis, off the request path."""
    proxy_redis_url: str | None = None
    """The sync's Redis; unset: `REDIS_URL` (under Sentinel, only a database number and the
    password)."""
    proxy_sync_interval_s: float = 0.5
    """How often the rate-limit spending is synced."""
    proxy_share_placements: bool = True
    """Affinity routing shares placements and replica load with the other proxy instances
    through Redis (needs `PROXY_REDIS_SYNC`), off the request path."""
    proxy_placement_sync_s: float = Field(default=0.1, gt=0, le=5.0)
    """How often each instance publishes what it placed and its load, and reads the others'."""
    proxy_placement_ttl_s: float = Field(default=5.0, gt=0)
    """An instance's load counts this long after it last published (at least twice
    `PROXY_PLACEMENT_SYNC_S`)."""

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
    def _proxy_redis_urls(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None:
            check_url(value, REDIS_SCHEMES, env_name(info.field_name or ""), host=False)
        return value

    @model_validator(mode="after")
    def _urls_under_sentinel(self) -> ProxySettings:
        self.check_sentinel_urls(
            {"redis_url": self.redis_url, "proxy_redis_url": self.proxy_redis_url}
        )
        return self

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
