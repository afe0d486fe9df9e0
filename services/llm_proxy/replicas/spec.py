"""The proxy's settings (shared `Settings` plus its own knobs) and the replica pool description.

The pool comes from a YAML file (`TASKYARD_PROXY_POOL_FILE`) or from
`TASKYARD_PROXY_UPSTREAMS` ("url" or "model=url", comma-separated; a bare url serves any model).
YAML shape::

    replicas:
      - url: http://10.0.0.5:8000/v1
        model: llama-70b          # omit (or "*") to serve any model name
        weight: 2                 # share of the keyspace, default 1
        max_in_flight: 64         # requests at once before others queue
        api_key: sk-...           # sent upstream, optional
    fallbacks:
      llama-70b: [llama-8b]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import Field, field_validator

from services.llm_proxy.tenants import parse_limits
from shared.settings import Settings, items

__all__ = [
    "ANY_MODEL",
    "PoolSpec",
    "ProxySettings",
    "ReplicaSpec",
    "get_proxy_settings",
    "load_pool",
]

ANY_MODEL = "*"


class ProxySettings(Settings):
    """Shared settings plus the proxy's own (same `TASKYARD_` prefix)."""

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
    # `redis_url`.
    proxy_redis_sync: bool = True
    proxy_redis_url: str | None = None
    proxy_sync_interval_s: float = 0.5

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


@dataclass(frozen=True, slots=True)
class ReplicaSpec:
    """One upstream replica as configured."""

    url: str
    model: str = ANY_MODEL
    weight: float = 1.0
    max_in_flight: int = 256
    api_key: str | None = None
    context_length: int | None = None  # the model's window, reported by /v1/models

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or "127.0.0.1"

    @property
    def port(self) -> int:
        parts = urlsplit(self.url)
        return parts.port or (443 if parts.scheme == "https" else 80)

    @property
    def tls(self) -> bool:
        return urlsplit(self.url).scheme == "https"

    @property
    def base_path(self) -> str:
        """The path prefix before `/chat/completions`, e.g. "/v1"."""
        return urlsplit(self.url).path.rstrip("/")


@dataclass(frozen=True, slots=True)
class PoolSpec:
    """Every replica, and for each model the models to try when it cannot serve."""

    replicas: tuple[ReplicaSpec, ...]
    fallbacks: dict[str, tuple[str, ...]] = field(default_factory=dict)


def load_pool(settings: ProxySettings) -> PoolSpec:
    """The pool from the YAML file if set, else from `proxy_upstreams`."""
    if settings.proxy_pool_file:
        return _pool_from_yaml(Path(settings.proxy_pool_file), settings)
    replicas = tuple(
        _replica_from_entry(entry.strip(), settings)
        for entry in settings.proxy_upstreams.split(",")
        if entry.strip()
    )
    return PoolSpec(replicas, _parse_fallbacks(settings.proxy_fallbacks))


def _replica_from_entry(entry: str, settings: ProxySettings) -> ReplicaSpec:
    model, url = entry.split("=", 1) if "=" in entry.split("://", 1)[0] else (ANY_MODEL, entry)
    return ReplicaSpec(
        url=url.strip(), model=model.strip(), max_in_flight=settings.proxy_max_in_flight
    )


def _parse_fallbacks(text: str) -> dict[str, tuple[str, ...]]:
    pairs = (item.split("=", 1) for item in text.split(",") if "=" in item)
    return {
        name.strip(): tuple(m.strip() for m in rest.split("|") if m.strip()) for name, rest in pairs
    }


def _pool_from_yaml(path: Path, settings: ProxySettings) -> PoolSpec:
    data: dict[str, Any] = yaml.safe_load(path.read_text()) or {}
    replicas = tuple(
        ReplicaSpec(
            url=str(item["url"]),
            model=str(item.get("model", ANY_MODEL)),
            weight=float(item.get("weight", 1.0)),
            max_in_flight=int(item.get("max_in_flight", settings.proxy_max_in_flight)),
            api_key=item.get("api_key"),
            context_length=int(item["context_length"]) if item.get("context_length") else None,
        )
        for item in data.get("replicas", [])
    )
    fallbacks = {
        str(name): tuple(str(m) for m in ([targets] if isinstance(targets, str) else targets))
        for name, targets in (data.get("fallbacks") or {}).items()
    }
    return PoolSpec(replicas, fallbacks or _parse_fallbacks(settings.proxy_fallbacks))
