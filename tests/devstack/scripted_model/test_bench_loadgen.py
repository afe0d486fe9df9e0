"""The benchmark's load generator against a scripted model: counts, lanes, cache headers.

Only behaviour is asserted here; the figures themselves belong to `bench/proxy_bench.py`.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from devstack.scripted_model import PrefixCacheOptions, ScriptedModelThread

BENCH = Path(__file__).resolve().parents[3] / "bench"


def _loadgen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("taskyard_bench_loadgen", BENCH / "_loadgen.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _chat(text: str, session: str) -> dict[str, Any]:
    body = {"model": "m", "messages": [{"role": "user", "content": text}], "stream": True}
    return {"path": "/v1/chat/completions", "body": json.dumps(body),
            "headers": {"x-session-id": session}}  # fmt: skip


def test_cycle_mode_stops_at_max_requests(model: ScriptedModelThread) -> None:
    spec = {
        "host": "127.0.0.1", "port": model.port, "concurrency": 3, "duration_s": 30,
        "max_requests": 20, "requests": [_chat("hello", "s")],
    }  # fmt: skip
    result = asyncio.run(_loadgen().run_load(spec))
    assert (result["requests"], result["ok"], result["errors"]) == (20, 20, 0)
    assert result["latency_ms"]["p50"] >= result["first_byte_ms"]["p50"] > 0
    assert result["lane_locality"] is None


def test_lanes_send_every_turn_and_sum_cached_tokens(
    start_model: Callable[..., ScriptedModelThread],
) -> None:
    model = start_model(prefix_cache=PrefixCacheOptions(block_tokens=2))
    long_text = " ".join(f"w{i}" for i in range(40))
    lanes = [[_chat(long_text, f"s{lane}")] * 3 for lane in range(4)]
    spec = {"host": "127.0.0.1", "port": model.port, "concurrency": 2, "lanes": lanes}
    result = asyncio.run(_loadgen().run_load(spec))
    assert result["ok"] == 12
    assert result["lane_locality"] == 1.0  # one replica serves every turn
    # The first turn of all fills the cache; the 11 after it hit every full block (41 words).
    assert result["cached_tokens"] == 11 * 40


def test_lane_ports_send_each_lane_to_its_own_replica(
    start_model: Callable[..., ScriptedModelThread],
) -> None:
    first, second = start_model(), start_model()
    lanes = [[_chat("hi", f"s{lane}")] * (lane + 1) for lane in range(3)]
    spec = {
        "host": "127.0.0.1", "port": first.port, "concurrency": 3, "lanes": lanes,
        "lane_ports": [first.port, second.port, first.port],
    }  # fmt: skip
    result = asyncio.run(_loadgen().run_load(spec))
    assert result["ok"] == 6
    assert first.server is not None and second.server is not None
    assert first.server.app.counters.requests == 1 + 3
    assert second.server.app.counters.requests == 2


def test_turn_ports_send_each_turn_to_its_own_port_and_think_time_paces_them(
    start_model: Callable[..., ScriptedModelThread],
) -> None:
    first, second = start_model(), start_model()
    lanes = [[_chat("hi", f"s{lane}")] * 3 for lane in range(2)]
    spec = {
        "host": "127.0.0.1", "port": first.port, "concurrency": 2, "lanes": lanes,
        "turn_ports": [[first.port, second.port, first.port], [second.port] * 3],
        "think_ms": 100,
    }  # fmt: skip
    result = asyncio.run(_loadgen().run_load(spec))
    assert result["ok"] == 6
    assert first.server is not None and second.server is not None
    assert (first.server.app.counters.requests, second.server.app.counters.requests) == (2, 4)
    assert result["lane_locality"] == (2 + 3) / 6
    assert result["elapsed_s"] >= 0.2  # two pauses between three turns
