"""Benchmark taskyard's LLM proxy against going direct and against the LiteLLM proxy.

    .venv/bin/python bench/proxy_bench.py [--quick] [--skip-litellm] [--routing-only | --fleet]
        [--servers [--rounds N]]

One run, one machine, the same scripted replicas (`devstack.scripted_model`, no GPU):

1. Overhead and throughput: one client (added latency), 50 clients (requests/s), one streaming
   client (added time to first byte) against the replica directly, through taskyard's proxy
   (one worker process), through it with tracing on (spans exported over OTLP/HTTP to a sink
   that keeps nothing) and through LiteLLM's proxy (one worker, its own virtualenv).
2. Routing quality: 4 replicas modelling vLLM's prefix cache, many multi-turn sessions that
   share a few system prompts, sent with `X-Session-ID`, through taskyard's proxy with round
   robin (the baseline), least outstanding requests (full run only) and its default routing,
   and, for scale, straight to the replicas with each session pinned to one (sticky, balanced,
   no proxy): cache-hit rate, time to first token, load spread, session locality.

3. Proxies that agree: the same sessions, each turn after a pause (an agent's tool call),
   through one proxy, through two proxy instances sharing placements and load through Redis
   with a session's turns alternating between them (the first one at random), and through two
   that do not share (the old behaviour): cache-hit rate and locality; then the added latency
   at one client with the sharing on (every request a new session, so every request a
   placement to publish) and off.
   `--fleet` runs only this part (`make bench` does).

`--servers` runs only a side-by-side of the proxy's HTTP server: its own HTTP/1.1 core
(`shared.http1`) against uvicorn (httptools + uvloop) serving the same proxy through a raw ASGI
app (`_asgi_proxy.py`), alternating in rounds: added latency p50/p99 at one client and
requests/s at `--clients` clients.

All traffic goes to 127.0.0.1, bounded in count and time. Figures are printed, never asserted.
The load generator runs in its own process: `_loadgen.py`, or `wrk` (C, much cheaper on CPU)
for the many-clients phase where it is installed. On a shared 2-core machine, other work (and
the client itself) skews the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # devstack, from a checkout

import httpx
import redis
from _litellm import start_litellm
from _taskyard import proxy_available, start_asgi_proxy, start_taskyard_proxy
from _workload import SessionMix, chat_request, session_lanes
from _wrk import wrk_available, wrk_load

from devstack.llm import start_scripted_model
from devstack.procs import ChildFailed, Processes, free_port

MODEL = "scripted"
LOADGEN = Path(__file__).resolve().parent / "_loadgen.py"
OTLP_SINK = Path(__file__).resolve().parent / "_otlp_sink.py"
TASKYARD_KEY = os.environ.get("TASKYARD_LLM_API_KEY", "taskyard")
BLOCK_TOKENS = 16
# The reference: no proxy, session i sent straight to replica i mod N (sticky and balanced).
STICKY = "sticky (no proxy)"
POLICIES = ("round_robin", "least_outstanding", "affinity", STICKY)


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


def _plan(args: argparse.Namespace) -> Plan:
    quick, clients = args.quick, args.clients
    scale = 0.3 if quick else 1.0
    phases = (
        Phase("one client", 1, False, 5 * scale, 0.5, 20_000),
        Phase(
            f"{clients} clients{' (wrk)' if wrk_available() else ''}",
            clients,
            False,
            10 * scale,
            1.0,
            10**7,
        ),
        Phase("one client, stream", 1, True, 5 * scale, 0.5, 20_000),
    )
    sessions = (48 if quick else 144) * args.replicas // 4
    mix = SessionMix(sessions=sessions, turns=args.turns)
    # Round robin is the baseline; "affinity" is taskyard's default routing.
    policies = ("round_robin", "affinity", STICKY) if quick else POLICIES
    return Plan(phases, mix, 4 * args.replicas, args.cache_headroom, policies, args.replicas)


@dataclass(frozen=True, slots=True)
class Target:
    """Where the load goes: a root URL and the headers it wants."""

    name: str
    url: str
    headers: dict[str, str]

    @property
    def port(self) -> int:
        return _port(self.url)


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


def _overhead_request(target: Target, stream: bool) -> dict[str, Any]:
    return chat_request(MODEL, [{"role": "user", "content": "hello there"}], stream, target.headers)


def measure(target: Target, phase: Phase) -> dict[str, Any]:
    """One phase against one target: wrk for many clients where it exists, else `_loadgen`."""
    request = _overhead_request(target, phase.stream)
    if phase.concurrency > 1 and wrk_available():
        wrk_load(target.url, request, phase.concurrency, phase.warmup_s)  # warm-up, unmeasured
        return wrk_load(target.url, request, phase.concurrency, phase.duration_s)
    spec = {
        "host": "127.0.0.1",
        "port": target.port,
        "concurrency": phase.concurrency,
        "duration_s": phase.duration_s,
        "warmup_s": phase.warmup_s,
        "max_requests": phase.max_requests,
        "requests": [request],
    }
    return run_load(spec)


# 1. overhead and throughput


def overhead_targets(procs: Processes, workdir: Path, skip_litellm: bool) -> list[Target]:
    replica = start_scripted_model(procs, "replica")
    targets = [Target("direct", replica, {})]
    if proxy_available():
        auth = {"authorization": f"Bearer {TASKYARD_KEY}"}
        targets.append(Target("taskyard", start_taskyard_proxy(procs, "taskyard", [replica]), auth))
        sink = procs.start("otlp_sink", [sys.executable, str(OTLP_SINK)]).announced_url()
        env = {"TASKYARD_OTLP_ENDPOINT": sink}
        traced = start_taskyard_proxy(procs, "traced", [replica], env=env)
        targets.append(Target("traced", traced, auth))
    else:
        print("! taskyard proxy: services/llm_proxy/__main__.py not found; skipped")
    if not skip_litellm:
        litellm = start_litellm(procs, replica, MODEL, workdir)
        targets.append(
            Target("litellm", litellm.url, {"authorization": f"Bearer {litellm.master_key}"})
        )
    return targets


def run_overhead(procs: Processes, plan: Plan, workdir: Path, skip_litellm: bool) -> None:
    targets = overhead_targets(procs, workdir, skip_litellm)
    results: dict[str, list[dict[str, Any]]] = {}
    for target in targets:
        results[target.name] = [measure(target, phase) for phase in plan.phases]
        print(f"  measured {target.name}", flush=True)
    print_overhead(plan, results)


def print_overhead(plan: Plan, results: dict[str, list[dict[str, Any]]]) -> None:
    _print_overhead_table(plan, results)
    _print_overhead_verdicts(plan, results)


def _print_overhead_table(plan: Plan, results: dict[str, list[dict[str, Any]]]) -> None:
    one, many, stream = plan.phases
    print(f"\n{'target':<10}| {one.name:^27}| {many.name:^35}| {stream.name + ' (TTFB)':^27}")
    print(
        f"{'':<10}| {'p50 ms':>8} {'p99 ms':>8} {'n':>8} | {'req/s':>9} {'p50 ms':>8} "
        f"{'p99 ms':>8} {'errors':>6} | {'p50 ms':>8} {'p99 ms':>8} {'n':>8}"
    )
    for name, (a, b, c) in results.items():
        print(
            f"{name:<10}| {_ms(a, 'latency_ms', 'p50')} {_ms(a, 'latency_ms', 'p99')} "
            f"{a['ok']:>8} | {b['rps']:>9.0f} {_ms(b, 'latency_ms', 'p50')} "
            f"{_ms(b, 'latency_ms', 'p99')} {b['errors']:>6} | "
            f"{_ms(c, 'first_byte_ms', 'p50')} {_ms(c, 'first_byte_ms', 'p99')} {c['ok']:>8}"
        )


def _print_overhead_verdicts(plan: Plan, results: dict[str, list[dict[str, Any]]]) -> None:
    direct = results["direct"]
    for name, (a, _, c) in results.items():
        if name == "direct":
            continue
        added = a["latency_ms"]["p50"] - direct[0]["latency_ms"]["p50"]
        added99 = a["latency_ms"]["p99"] - direct[0]["latency_ms"]["p99"]
        ttft = c["first_byte_ms"]["p50"] - direct[2]["first_byte_ms"]["p50"]
        print(
            f"{name}: added latency p50 {added:.3f} ms, p99 {added99:.3f} ms; "
            f"added time to first byte (stream) p50 {ttft:.3f} ms"
        )
    if "taskyard" in results and "litellm" in results:
        ratio = results["taskyard"][1]["rps"] / max(results["litellm"][1]["rps"], 1e-9)
        print(
            f"taskyard / litellm requests/s at {plan.phases[1].concurrency} clients: {ratio:.1f}x "
            "(target >= 25x)"
        )
    if "taskyard" in results:
        added = results["taskyard"][0]["latency_ms"]["p50"] - direct[0]["latency_ms"]["p50"]
        print(f"taskyard added p50: {added:.3f} ms (target <= 0.5 ms)")


def _ms(result: dict[str, Any], kind: str, key: str) -> str:
    value = result[kind].get(key)
    return f"{value:>8.3f}" if value is not None else f"{'-':>8}"


# the HTTP server side by side


def run_servers(procs: Processes, plan: Plan, rounds: int) -> None:
    """Own core vs uvicorn, each measured `rounds` times, alternating, against one replica."""
    replica = start_scripted_model(procs, "replica")
    auth = {"authorization": f"Bearer {TASKYARD_KEY}"}
    targets = [
        Target("direct", replica, {}),
        Target("own core", start_taskyard_proxy(procs, "own", [replica]), auth),
        Target("uvicorn", start_asgi_proxy(procs, "uvicorn", [replica]), auth),
    ]
    one, many = plan.phases[:2]
    rows: dict[str, list[tuple[float, float, float]]] = {t.name: [] for t in targets}
    for number in range(rounds):
        for target in targets:
            a, b = measure(target, one), measure(target, many)
            rows[target.name].append((a["latency_ms"]["p50"], a["latency_ms"]["p99"], b["rps"]))
        print(f"  round {number + 1} of {rounds} measured", flush=True)
    print_servers(many.concurrency, rows)


def print_servers(clients: int, rows: dict[str, list[tuple[float, float, float]]]) -> None:
    """Each round's added latency (against direct, same round) and req/s, then the means."""
    print(f"\n{'server':<15}| {'added p50 ms':>12} {'added p99 ms':>12} | req/s, {clients} clients")
    means = {}
    for name in ("own core", "uvicorn"):
        added = [
            (p50 - d50, p99 - d99, rps)
            for (p50, p99, rps), (d50, d99, _) in zip(rows[name], rows["direct"], strict=True)
        ]
        means[name] = [sum(column) / len(added) for column in zip(*added, strict=True)]
        for label, (p50, p99, rps) in [
            *((name, row) for row in added),
            (f"{name} mean", means[name]),
        ]:
            print(f"{label:<15}| {p50:>12.3f} {p99:>12.3f} | {rps:>9.0f}")
    own, uv = means["own core"], means["uvicorn"]
    within = uv[0] <= 1.1 * own[0] and uv[2] >= 0.9 * own[2]
    print(
        f"uvicorn / own core: added p50 {uv[0] / max(own[0], 1e-9):.2f}x, added p99 "
        f"{uv[1] / max(own[1], 1e-9):.2f}x, req/s {uv[2] / max(own[2], 1e-9):.2f}x; "
        f"within 10% on added p50 and req/s: {'yes' if within else 'no'}"
    )


# 2. routing quality


def run_routing(procs: Processes, plan: Plan) -> None:
    if not proxy_available():
        print("! routing quality needs taskyard's proxy; skipped")
        return
    flags = _prefix_flags(plan)
    print(f"workload: {plan.sessions.describe()}; {plan.session_concurrency} sessions at once")
    print(f"replicas: {plan.replicas} x scripted model {' '.join(flags)}")
    print(
        f"(cache = {plan.cache_headroom}x a replica's share of the live sessions' mean prompt; "
        "locality = share of a session's turns its most used replica served)"
    )
    rows = {policy: route_sessions(procs, plan, policy, flags) for policy in plan.policies}
    print(
        f"\n{'policy':<18} {'hit rate':>9} {'TTFT mean':>10} {'TTFT p99':>9} "
        f"{'load max/mean':>14} {'requests per replica':>24} {'locality':>9} {'errors':>7}"
    )
    for policy, row in rows.items():
        print(
            f"{policy:<18} {row['hit_rate']:>9.1%} {row['ttft_mean']:>8.2f}ms "
            f"{row['ttft_p99']:>7.2f}ms {row['spread']:>14.2f} "
            f"{row['per_replica']!s:>24} {row['locality']:>9.1%} {row['errors']:>7}"
        )
    base, ours, ideal = rows["round_robin"], rows["affinity"], rows[STICKY]
    print(
        f"taskyard routing / round robin hit rate: {_ratio(ours, base):.1f}x (target >= 3x); "
        f"max replica load {ours['spread']:.2f}x the mean (target <= 1.5x)"
    )
    print(
        f"for scale: the sticky reference / round robin: {_ratio(ideal, base):.1f}x; taskyard "
        f"routing reaches {ours['hit_rate'] / max(ideal['hit_rate'], 1e-9):.0%} of its hit rate"
    )


def _ratio(row: dict[str, Any], base: dict[str, Any]) -> float:
    return row["hit_rate"] / base["hit_rate"] if base["hit_rate"] else float("inf")


def _prefix_flags(plan: Plan) -> list[str]:
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


def route_sessions(procs: Processes, plan: Plan, policy: str, flags: list[str]) -> dict[str, Any]:
    """Fresh replicas and a fresh proxy with `policy`; send every session; read the replicas."""
    names, replicas = _start_replicas(procs, plan, flags)
    spec = _sessions_spec(plan)
    if policy == STICKY:
        ports = [_port(url) for url in replicas]
        spec["port"] = ports[0]
        spec["lane_ports"] = [ports[i % plan.replicas] for i in range(plan.sessions.sessions)]
    else:
        spec["port"] = _port(start_taskyard_proxy(procs, "proxy", replicas, policy))
        names.append("proxy")
    return _run_and_read(procs, spec, names, replicas)


def _start_replicas(procs: Processes, plan: Plan, flags: list[str]) -> tuple[list[str], list[str]]:
    names = [f"replica-{i}" for i in range(plan.replicas)]
    return names, [start_scripted_model(procs, name, *flags) for name in names]


def _sessions_spec(plan: Plan) -> dict[str, Any]:
    headers = {"authorization": f"Bearer {TASKYARD_KEY}"}
    return {
        "host": "127.0.0.1",
        "concurrency": plan.session_concurrency,
        "duration_s": 300.0,
        "lanes": session_lanes(plan.sessions, MODEL, headers),
    }


def _run_and_read(
    procs: Processes, spec: dict[str, Any], names: list[str], replicas: list[str]
) -> dict[str, Any]:
    """Run the sessions, read the replicas' cache counters, stop everything named."""
    load = run_load(spec)
    stats = [httpx.get(f"{replica}/scripted/stats", timeout=5).json() for replica in replicas]
    for name in names:
        procs.stop(name)
    return _routing_row(load, stats)


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _routing_row(load: dict[str, Any], stats: list[dict[str, Any]]) -> dict[str, Any]:
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


# 3. proxies that agree

# An agent's next model call follows its tool call: time enough for two placement syncs.
THINK_MS = 300.0
FLEETS = ("one proxy", "two proxies, sharing", "two proxies, not sharing")


def run_fleet(procs: Processes, plan: Plan) -> None:
    if not proxy_available():
        print("! proxies that agree need taskyard's proxy; skipped")
        return
    redis_url = start_redis(procs)
    flags = _prefix_flags(plan)
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
    names, replicas = _start_replicas(procs, plan, flags)
    count = 1 if name == FLEETS[0] else 2
    proxies = [start_taskyard_proxy(procs, f"proxy-{i}", replicas, env=env) for i in range(count)]
    names += [f"proxy-{i}" for i in range(count)]
    if count > 1 and env["TASKYARD_PROXY_SHARE_PLACEMENTS"] == "true":
        _wait_peers(proxies)
    spec = _sessions_spec(plan)
    ports = [_port(p) for p in proxies]
    spec.update(port=ports[0], turn_ports=_alternating(plan, ports), think_ms=THINK_MS)
    return _run_and_read(procs, spec, names, replicas)


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
        targets[sharing] = _port(urls[0])
    phase = plan.phases[0]
    added: dict[str, list[float]] = {name: [] for name in targets}
    for number in range(rounds):
        direct = _one_client(_port(replica), [chat_request(MODEL, hello, False, {})], phase)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter phases, under a minute")
    parser.add_argument("--skip-litellm", action="store_true", help="leave LiteLLM out")
    parser.add_argument("--clients", type=int, default=50, help="clients of the throughput phase")
    parser.add_argument(
        "--cache-headroom",
        type=float,
        default=1.25,
        help="replica prefix cache size, in units of its share of the live sessions' prompts",
    )
    parser.add_argument("--replicas", type=int, default=4, help="replicas of the routing phase")
    parser.add_argument("--turns", type=int, default=8, help="turns per routing session")
    parser.add_argument("--routing-only", action="store_true", help="only phase 2")
    parser.add_argument("--fleet", action="store_true", help="only phase 3, proxies that agree")
    parser.add_argument(
        "--servers", action="store_true", help="only the own core vs uvicorn side-by-side"
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds of --servers")
    args = parser.parse_args()
    plan = _plan(args)
    began = time.monotonic()
    print(
        f"proxy_bench ({'quick' if args.quick else 'full'}): {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.2f} at start; the client is a separate process"
    )
    with Processes() as procs, tempfile.TemporaryDirectory() as workdir:
        try:
            if args.servers:
                print("\n== HTTP server: own core vs uvicorn + raw ASGI (same proxy) ==")
                run_servers(procs, plan, args.rounds)
                return
            if not (args.routing_only or args.fleet):
                print("\n== 1. Overhead and throughput (chat completion, scripted replica) ==")
                run_overhead(procs, plan, Path(workdir), args.skip_litellm)
            if not args.fleet:
                print("\n== 2. Routing quality (prefix-cache replicas, multi-turn sessions) ==")
                run_routing(procs, plan)
            if not args.routing_only:
                print("\n== 3. Proxies that agree (two instances, placements shared in Redis) ==")
                run_fleet(procs, plan)
        except ChildFailed as failure:
            print(f"! a child process failed: {failure}")
            raise SystemExit(1) from failure
    print(f"\ndone in {time.monotonic() - began:.0f} s; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
