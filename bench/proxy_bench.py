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
   `--fleet` runs only this part (`make bench` does); it is `_proxy_fleet.py`, and what the
   parts share (the plan, a load run, the routing workload) is `_proxy_load.py`.

`--servers` runs only a side-by-side of the proxy's HTTP server: its own HTTP/1.1 core
(`taskyard.http1`) against uvicorn (httptools + uvloop) serving the same proxy through a raw ASGI
app (`_asgi_proxy.py`), alternating in rounds: added latency p50/p99 at one client and
requests/s at `--clients` clients.

All traffic goes to 127.0.0.1, bounded in count and time. Figures are printed, never asserted.
The load generator runs in its own process: `_loadgen.py`, or `wrk` (C, much cheaper on CPU)
for the many-clients phase where it is installed. On a shared 2-core machine, other work (and
the client itself) skews the figures.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # devstack, from a checkout

from _litellm import start_litellm
from _proxy_fleet import run_fleet
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
from _taskyard import proxy_available, start_asgi_proxy, start_taskyard_proxy
from _workload import SessionMix, chat_request
from _wrk import wrk_available, wrk_load

from devstack.llm import start_scripted_model
from devstack.procs import ChildFailed, Processes

OTLP_SINK = Path(__file__).resolve().parent / "_otlp_sink.py"
# The reference: no proxy, session i sent straight to replica i mod N (sticky and balanced).
STICKY = "sticky (no proxy)"
POLICIES = ("round_robin", "least_outstanding", "affinity", STICKY)


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
        return port_of(self.url)


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
    flags = prefix_flags(plan)
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


def route_sessions(procs: Processes, plan: Plan, policy: str, flags: list[str]) -> dict[str, Any]:
    """Fresh replicas and a fresh proxy with `policy`; send every session; read the replicas."""
    names, replicas = start_replicas(procs, plan, flags)
    spec = sessions_spec(plan)
    if policy == STICKY:
        ports = [port_of(url) for url in replicas]
        spec["port"] = ports[0]
        spec["lane_ports"] = [ports[i % plan.replicas] for i in range(plan.sessions.sessions)]
    else:
        spec["port"] = port_of(start_taskyard_proxy(procs, "proxy", replicas, policy))
        names.append("proxy")
    return run_and_read(procs, spec, names, replicas)


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
