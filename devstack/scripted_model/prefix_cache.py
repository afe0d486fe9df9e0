"""A model of vLLM's automatic prefix cache, for the routing-quality benchmark.

The prompt is cut into fixed-size blocks of words; each block is keyed by the hash of every
block up to it (so a block only hits after the same whole prefix), and an LRU of those keys
with a fixed capacity stands in for the KV cache.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from devstack.scripted_model.options import PrefixCacheOptions

__all__ = ["CacheLookup", "PrefixCache"]


@dataclass(frozen=True, slots=True)
class CacheLookup:
    """How much of one prompt the cache held."""

    prompt_tokens: int
    cached_tokens: int

    @property
    def uncached_tokens(self) -> int:
        return self.prompt_tokens - self.cached_tokens


class PrefixCache:
    """Looks prompts up block by block and keeps every block it saw, least recent evicted."""

    def __init__(self, options: PrefixCacheOptions) -> None:
        self.options = options
        self._blocks: OrderedDict[int, None] = OrderedDict()
        self.requests = 0
        self.prompt_tokens = 0
        self.cached_tokens = 0

    def lookup(self, tokens: list[str]) -> CacheLookup:
        """Count the cached prefix of `tokens`, then insert (or refresh) all its full blocks."""
        keys = self._block_keys(tokens)
        hits = next((i for i, key in enumerate(keys) if key not in self._blocks), len(keys))
        # Touch the last block first: equally recent, a prompt's tail is evicted before its
        # head, as vLLM does, so an evicted block never orphans the blocks behind it.
        for key in reversed(keys):
            self._touch(key)
        cached = hits * self.options.block_tokens
        self._count(len(tokens), cached)
        return CacheLookup(len(tokens), cached)

    def prefill_ms(self, lookup: CacheLookup) -> float:
        """The extra time to first token the uncached part of a prompt costs."""
        return lookup.uncached_tokens * self.options.uncached_token_ms

    def stats(self) -> dict[str, float | int]:
        """Counters for `GET /scripted/stats`."""
        rate = self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0
        return {
            "cache_requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "hit_rate": rate,
            "cached_blocks": len(self._blocks),
        }

    def _block_keys(self, tokens: list[str]) -> list[int]:
        size, key, keys = self.options.block_tokens, 0, []
        for start in range(0, len(tokens) - size + 1, size):
            key = hash((key, *tokens[start : start + size]))
            keys.append(key)
        return keys

    def _touch(self, key: int) -> None:
        self._blocks[key] = None
        self._blocks.move_to_end(key)
        if len(self._blocks) > self.options.capacity_blocks:
            self._blocks.popitem(last=False)

    def _count(self, prompt_tokens: int, cached_tokens: int) -> None:
        self.requests += 1
        self.prompt_tokens += prompt_tokens
        self.cached_tokens += cached_tokens
