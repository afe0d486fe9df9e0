"""The scripted model's behaviour knobs: set at start-up, changed at run time by the tests."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

__all__ = ["PrefixCacheOptions", "ScriptedOptions"]

# Only these may be changed through `POST /scripted/config`.
_RUNTIME_KEYS = {"latency_ms", "tokens_per_s", "fail_status", "fail_after_chunks", "hold_until"}


@dataclass(slots=True)
class PrefixCacheOptions:
    """A model of vLLM's automatic prefix cache: blocks of words, an LRU, a prefill cost."""

    block_tokens: int = 16
    capacity_blocks: int = 4096
    uncached_token_ms: float = 0.05


@dataclass(slots=True)
class ScriptedOptions:
    """How the scripted model answers; `latency_ms` comes before the first byte."""

    model: str = "scripted"
    latency_ms: float = 0.0
    tokens_per_s: float = 0.0
    fail_status: int | None = None
    fail_after_chunks: int | None = None
    # Model calls wait until this many wait together (`gate.py`); None: no holding.
    hold_until: int | None = None
    prefix_cache: PrefixCacheOptions | None = None

    def update(self, changes: dict[str, Any]) -> None:
        """Apply a `POST /scripted/config` body; raises ValueError on an unknown or bad value."""
        unknown = set(changes) - _RUNTIME_KEYS
        if unknown:
            raise ValueError(f"unknown option(s): {', '.join(sorted(unknown))}")
        for key, value in changes.items():
            setattr(self, key, _checked(key, value))

    def runtime_view(self) -> dict[str, Any]:
        """The options `POST /scripted/config` reports back."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name in _RUNTIME_KEYS}


def _checked(key: str, value: Any) -> Any:
    if key in {"latency_ms", "tokens_per_s"}:
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ValueError(f"{key} must be a number >= 0")
        return float(value)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{key} must be an integer or null")
    if key == "hold_until" and value < 1:
        raise ValueError("hold_until must be >= 1 (or null: no holding)")
    if key == "fail_status" and not 400 <= value <= 599:
        raise ValueError("fail_status must be an HTTP error status (400-599)")
    if value < 0:
        raise ValueError(f"{key} must be >= 0")
    return value
