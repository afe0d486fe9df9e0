"""The proxy benchmark's shared parts (`proxy_bench.py`): the plan of a run, the load run in a
process of its own, and the routing workload (prefix-cache replicas, multi-turn sessions)
that its routing and fleet parts both send and read back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from _workload import SessionMix, session_lanes

from devstack.llm import start_scripted_model
from devstack.procs import Processes

MODEL = "scripted"
LOADGEN = Path(__file__).resolve().parent / "_loadgen.py"
TASKYARD_KEY = os.environ.get("TASKYARD_LLM_API_KEY", "taskyard")
BLOCK_TOKENS = 16


@dataclass(frozen=True, slots=True)
class Phase:
    """One measured load shape."""

    name: str
    concurrency: int
    stream: bool
    duration_s: float
    warmup_s: float
    max_requests: int


@dataclass(frozen=True, slots=True)
class Plan:
    phases: tuple[Phase, ...]
    sessions: SessionMix
    session_concurrency: int
    cache_headroom: float
    policies: tuple[str, ...]
    replicas: int


def run_load(spec: dict[str, Any]) -> dict[str, Any]:
    """Run `_loadgen.py` in its own process on `spec` and return its JSON summary."""
    limit = float(spec.get("duration_s", 60)) + float(spec.get("warmup_s", 0)) + 120
    ran = subprocess.run(
        [sys.executable, str(LOADGEN)],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        timeout=limit,
        check=True,
    )
    return json.loads(ran.stdout)


def prefix_flags(plan: Plan) -> list[str]:
    """Replica flags; the cache holds `cache_headroom` x its share of the live sessions' prompts.

    KV cache is the scarce resource of a loaded GPU pool, which is when routing matters.
    """
    live_per_replica = plan.session_concurrency / plan.replicas
    prompt_blocks = plan.sessions.mean_prompt_words() / BLOCK_TOKENS
    system_blocks = plan.sessions.system_prompts * plan.sessions.system_words / BLOCK_TOKENS
    blocks = round(plan.cache_headroom * live_per_replica * prompt_blocks + system_blocks)
    return [
        "--prefix-cache", "--latency-ms", "2", "--block-tokens", str(BLOCK_TOKENS),
        "--cache-blocks", str(blocks), "--uncached-token-ms", "0.05",
    ]  # fmt: skip


def start_replicas(procs: Processes, plan: Plan, flags: list[str]) -> tuple[list[str], list[str]]:
    names = [f"replica-{i}" for i in range(plan.replicas)]
    return names, [start_scripted_model(procs, name, *flags) for name in names]


def sessions_spec(plan: Plan) -> dict[str, Any]:
    headers = {"authorization": f"Bearer {TASKYARD_KEY}"}
    return {
        "host": "127.0.0.1",
        "concurrency": plan.session_concurrency,
        "duration_s": 300.0,
        "lanes": session_lanes(plan.sessions, MODEL, headers),
    }


def run_and_read(
    procs: Processes, spec: dict[str, Any], names: list[str], replicas: list[str]
) -> dict[str, Any]:
    """Run the sessions, read the replicas' cache counters, stop everything named."""
    load = run_load(spec)
    stats = [httpx.get(f"{replica}/scripted/stats", timeout=5).json() for replica in replicas]
    for name in names:
        procs.stop(name)
    return routing_row(load, stats)


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def routing_row(load: dict[str, Any], stats: list[dict[str, Any]]) -> dict[str, Any]:
    prompt = sum(s["prompt_tokens"] for s in stats)
    per_replica = [s["requests"] for s in stats]
    mean = sum(per_replica) / len(per_replica)
    return {
        "hit_rate": sum(s["cached_tokens"] for s in stats) / prompt if prompt else 0.0,
        "ttft_mean": load["first_byte_ms"].get("mean", 0.0),
        "ttft_p99": load["first_byte_ms"].get("p99", 0.0),
        "spread": max(per_replica) / mean if mean else 0.0,
        "per_replica": per_replica,
        "locality": load["lane_locality"],
        "errors": load["errors"],
    }
