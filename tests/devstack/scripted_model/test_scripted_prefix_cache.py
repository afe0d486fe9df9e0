"""The prefix-cache model: block hashing, LRU capacity, and how it shows over HTTP."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from devstack.scripted_model import PrefixCacheOptions, ScriptedModelThread
from devstack.scripted_model.prefix_cache import PrefixCache


def _words(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(count)]


def test_repeated_prompt_hits_every_full_block() -> None:
    cache = PrefixCache(PrefixCacheOptions(block_tokens=4, capacity_blocks=100))
    prompt = _words("w", 10)  # two full blocks and a partial one
    assert cache.lookup(prompt).cached_tokens == 0
    second = cache.lookup(prompt)
    assert (second.prompt_tokens, second.cached_tokens, second.uncached_tokens) == (10, 8, 2)


def test_a_block_only_hits_after_the_same_whole_prefix() -> None:
    cache = PrefixCache(PrefixCacheOptions(block_tokens=4, capacity_blocks=100))
    cache.lookup(_words("a", 4) + _words("b", 4))
    assert cache.lookup(_words("c", 4) + _words("b", 4)).cached_tokens == 0
    assert cache.lookup(_words("a", 4) + _words("z", 4)).cached_tokens == 4


def test_least_recently_used_blocks_are_evicted() -> None:
    cache = PrefixCache(PrefixCacheOptions(block_tokens=2, capacity_blocks=2))
    cache.lookup(_words("a", 2))
    cache.lookup(_words("b", 4))  # two blocks: "a" is evicted
    assert cache.lookup(_words("a", 2)).cached_tokens == 0
    assert cache.stats()["cached_blocks"] == 2


def test_prefill_cost_is_per_uncached_token() -> None:
    cache = PrefixCache(PrefixCacheOptions(block_tokens=2, uncached_token_ms=0.5))
    assert cache.prefill_ms(cache.lookup(_words("a", 5))) == 2.5
    assert cache.prefill_ms(cache.lookup(_words("a", 5))) == 0.5


def test_cached_tokens_show_in_header_and_stats(
    start_model: Callable[..., ScriptedModelThread],
) -> None:
    model = start_model(prefix_cache=PrefixCacheOptions(block_tokens=4))
    system = " ".join(_words("sys", 40))
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": "first question"},
        ],
    }
    with httpx.Client(base_url=f"http://127.0.0.1:{model.port}") as http:
        first = http.post("/v1/chat/completions", json=body, headers={"X-Session-ID": "s"})
        second = http.post("/v1/chat/completions", json=body)
        stats = http.get("/scripted/stats").json()
    assert first.headers["x-prefix-cached-tokens"] == "0"
    prompt_tokens = second.json()["usage"]["prompt_tokens"]  # 45: "system:" + 40 + 4
    assert int(second.headers["x-prefix-cached-tokens"]) == prompt_tokens // 4 * 4
    assert stats["cached_tokens"] == prompt_tokens // 4 * 4
    assert stats["prompt_tokens"] == 2 * prompt_tokens
    assert stats["cache_requests"] == 2


def test_without_prefix_cache_there_is_no_cache_header(control: httpx.Client) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    answer = control.post("/v1/chat/completions", json=body)
    assert "x-prefix-cached-tokens" not in answer.headers
    assert control.get("/scripted/stats").json()["prefix_cache"] is False


def test_a_prompt_loses_its_tail_before_its_head() -> None:
    cache = PrefixCache(PrefixCacheOptions(block_tokens=2, capacity_blocks=3))
    prompt = _words("p", 6)  # three blocks fill the cache
    cache.lookup(prompt)
    cache.lookup(_words("q", 2))  # one more block evicts the prompt's last block
    assert cache.lookup(prompt).cached_tokens == 4
