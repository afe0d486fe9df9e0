"""Part 3 of the proxy benchmark (`proxy_bench.py --fleet`): proxies that agree. The same
sessions through one proxy, through two sharing placements and load through Redis, and
through two that do not share; then the added latency of sharing at one client."""

from __future__ import annotations

import random
import shutil
import statistics
import time
from typing import Any

import httpx
import redis
from _proxy_load import (
    MODEL,
    TASKYARD_KEY,
    Phase,
    Plan,
    port_of,
    prefix_flags,
    run_and_read,
    run_load,
    sessions_spec,
    start_replicas,
)
from _taskyard import proxy_available, start_taskyard_proxy
from _workload import chat_request

from devstack.llm import start_scripted_model
from devstack.procs import Processes, free_port

# An agent's next model call follows its tool call: time enough for two placement syncs.
THINK_MS = 300.0
FLEETS = ("one proxy", "two proxies, sharing", "two proxies, not sharing")


def run_fleet(procs: Processes, plan: Plan) -> None:
    if not proxy_available():
        print("! proxies that agree need taskyard's proxy; skipped")
        return
    redis_url = start_redis(procs)
    flags = prefix_flags(plan)
    print(
        f"workload: {plan.sessions.describe()}; {plan.session_concurrency} sessions at once, "
        f"{THINK_MS:.0f} ms between a session's turns; with two proxies, a session's first "
        "turn goes to either at random, the next ones alternate"
    )
    print(f"replicas: {plan.replicas} x scripted model {' '.join(flags)}")
    rows = {
        name: fleet_sessions(procs, plan, flags, _fleet_env(redis_url, number, name), name)
        for number, name in enumerate(FLEETS)
    }
    print(f"\n{'proxies':<26} {'hit rate':>9} {'TTFT mean':>10} {'locality':>9} {'errors':>7}")
    for name, row in rows.items():
        print(
            f"{name:<26} {row['hit_rate']:>9.1%} {row['ttft_mean']:>8.2f}ms "
            f"{row['locality']:>9.1%} {row['errors']:>7}"
        )
    one = rows[FLEETS[0]]["hit_rate"] or 1e-9
    print(
        f"two proxies sharing reach {rows[FLEETS[1]]['hit_rate'] / one:.1%} of one proxy's hit "
        f"rate (target >= 95%); not sharing, {rows[FLEETS[2]]['hit_rate'] / one:.1%}"
    )
    fleet_overhead(procs, plan, redis_url)


def start_redis(procs: Processes) -> str:
    """A Redis of the benchmark's own (no persistence) on a free port; its URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server not found: `make deps` installs it")
    port = free_port()
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    child = procs.start("redis", argv)
    url = f"redis://127.0.0.1:{port}"
    client = redis.Redis.from_url(url)
    child.wait_until(lambda: _pings(client), f"PING answered on {url}")
    client.close()
    return url


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


def _fleet_env(redis_url: str, database: int, name: str) -> dict[str, str]:
    # A database per configuration, so none inherits another's placements.
    return {
        "TASKYARD_REDIS_URL": f"{redis_url}/{database + 1}",
        "TASKYARD_PROXY_REDIS_SYNC": "true",
        "TASKYARD_PROXY_SHARE_PLACEMENTS": "false" if "not sharing" in name else "true",
    }


def fleet_sessions(
    procs: Processes, plan: Plan, flags: list[str], env: dict[str, str], name: str
) -> dict[str, Any]:
    """Fresh replicas and one or two fresh proxies; every session, turns alternating."""
    names, replicas = start_replicas(procs, plan, flags)
    count = 1 if name == FLEETS[0] else 2
    proxies = [start_taskyard_proxy(procs, f"proxy-{i}", replicas, env=env) for i in range(count)]
    names += [f"proxy-{i}" for i in range(count)]
    if count > 1 and env["TASKYARD_PROXY_SHARE_PLACEMENTS"] == "true":
        _wait_peers(proxies)
    spec = sessions_spec(plan)
    ports = [port_of(p) for p in proxies]
    spec.update(port=ports[0], turn_ports=_alternating(plan, ports), think_ms=THINK_MS)
    return run_and_read(procs, spec, names, replicas)


def _alternating(plan: Plan, ports: list[int]) -> list[list[int]]:
    """Per session, the port of each turn: a first proxy at random (what a load balancer in
    front of them would do), then the proxies in turn."""
    rng = random.Random(plan.sessions.seed)
    starts = [rng.randrange(len(ports)) for _ in range(plan.sessions.sessions)]
    turns = range(plan.sessions.turns)
    return [[ports[(start + turn) % len(ports)] for turn in turns] for start in starts]


def _wait_peers(proxies: list[str], timeout_s: float = 10.0) -> None:
    """Until each proxy counts the others (its first syncs are done)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(_peers(url) == len(proxies) - 1 for url in proxies):
            return
        time.sleep(0.05)
    print("! the proxies did not see each other within 10 s; measuring anyway")


def _peers(url: str) -> float:
    for line in httpx.get(f"{url}/metrics", timeout=5).text.splitlines():
        if line.startswith("taskyard_proxy_peers "):
            return float(line.split()[1])
    return -1.0


def fleet_overhead(procs: Processes, plan: Plan, redis_url: str, rounds: int = 3) -> None:
    """Added latency at one client, a new session per request, through one of two proxies
    sharing and one of two not sharing: measured in alternating rounds (other work on the
    machine comes and goes), the median of each."""
    replica = start_scripted_model(procs, "overhead-replica")
    auth = {"authorization": f"Bearer {TASKYARD_KEY}"}
    hello = [{"role": "user", "content": "hello there"}]
    targets = {"off": 0, "on": 0}
    for number, sharing in enumerate(targets):
        env = {"TASKYARD_REDIS_URL": f"{redis_url}/{len(FLEETS) + number + 1}",
               "TASKYARD_PROXY_SHARE_PLACEMENTS": str(sharing == "on").lower()}  # fmt: skip
        urls = [start_taskyard_proxy(procs, f"overhead-{sharing}-{i}", [replica], env=env)
                for i in range(2)]  # fmt: skip
        if sharing == "on":
            _wait_peers(urls)
        targets[sharing] = port_of(urls[0])
    phase = plan.phases[0]
    added: dict[str, list[float]] = {name: [] for name in targets}
    for number in range(rounds):
        direct = _one_client(port_of(replica), [chat_request(MODEL, hello, False, {})], phase)
        for name, port in targets.items():
            sessions = [  # sessions never seen before: each request a placement to publish
                chat_request(MODEL, hello, False, {**auth, "x-session-id": f"{name}-{number}-{i}"})
                for i in range(phase.max_requests + 5_000)
            ]
            through = _one_client(port, sessions, phase)
            added[name].append(through["latency_ms"]["p50"] - direct["latency_ms"]["p50"])
    off, on = (statistics.median(added[name]) for name in targets)
    print(
        f"added p50 at one client, a new session per request, through one of two proxies "
        f"(median of {rounds} alternating rounds): not sharing {off:.3f} ms, sharing "
        f"{on:.3f} ms (target <= 0.5 ms)"
    )


def _one_client(port: int, requests: list[dict[str, Any]], phase: Phase) -> dict[str, Any]:
    spec = {
        "host": "127.0.0.1", "port": port, "concurrency": 1, "duration_s": phase.duration_s,
        "warmup_s": phase.warmup_s, "max_requests": phase.max_requests, "requests": requests,
    }  # fmt: skip
    return run_load(spec)
