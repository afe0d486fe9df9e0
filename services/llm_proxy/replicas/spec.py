"""The replica pool as configured: each replica's address and bounds, and the fallbacks.

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
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from services.llm_proxy.settings import ProxySettings

__all__ = ["ANY_MODEL", "PoolSpec", "ReplicaSpec", "load_pool"]

ANY_MODEL = "*"


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
