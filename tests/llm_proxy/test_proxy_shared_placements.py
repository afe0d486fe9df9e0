"""Two proxy processes sharing placements and load through a real Redis, in front of scripted
replicas: multi-turn sessions whose turns alternate between the proxies hit the prefix cache
about as often as through one proxy, keep each session on one replica, and keep being routed
while Redis is down."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from dataclasses import dataclass

import httpx
import pytest
from proxy_support import (
    API_KEY,
    ProxyFactory,
    ProxyProcess,
    RedisProcess,
    Replica,
    ReplicaFactory,
    metric,
    upstreams_of,
)
from waiting import wait_until

from devstack.procs import Processes

# vLLM's prefix cache as the scripted model models it (large enough to evict nothing here).
PREFIX_CACHE = ("--prefix-cache", "--latency-ms", "2", "--block-tokens", "16")
# An agent's next model call comes after its tool call: here, several syncs later.
THINK_S = 0.3
SYNC_S = "0.05"


@dataclass(frozen=True)
class Workload:
    """Agent-like sessions: shared system prompts, each turn adding user, answer and tool text."""

    sessions: int
    turns: int
    at_once: int
    seed: int = 3

    def histories(self) -> list[list[list[dict[str, str]]]]:
        """Per session, the messages of each turn (every turn resends the whole history)."""
        rng = random.Random(self.seed)
        systems = [_words(rng, 120) for _ in range(3)]
        out = []
        for session in range(self.sessions):
            history = [{"role": "system", "content": systems[session % 3]}]
            turns = []
            for _ in range(self.turns):
                history.append({"role": "user", "content": _words(rng, 30)})
                turns.append(list(history))
                history.append({"role": "assistant", "content": _words(rng, 30)})
                history.append({"role": "user", "content": _words(rng, 150)})  # a tool's output
            out.append(turns)
        return out


def _words(rng: random.Random, count: int) -> str:
    return " ".join(f"w{rng.randrange(50_000)}" for _ in range(count))


def run_sessions(workload: Workload, proxies: list[ProxyProcess], tag: str) -> list[list[str]]:
    """Every session, its first turn through a proxy picked at random (as a load balancer in
    front of them would), its next turns through the others in turn; per session, the replica
    that answered each turn.

    `at_once` sessions run together, their requests one at a time: no request waits on
    another's, so a turn sent off its session's replica is a disagreement between the proxies,
    not a spill under load, which would make the figures differ from run to run (the benchmark
    measures both together).
    """
    return asyncio.run(_run_sessions(workload, proxies, tag))


async def _run_sessions(
    workload: Workload, proxies: list[ProxyProcess], tag: str
) -> list[list[str]]:
    rng = random.Random(workload.seed)
    starts = [rng.randrange(len(proxies)) for _ in range(workload.sessions)]
    gate = asyncio.Semaphore(workload.at_once)
    one_at_a_time = asyncio.Lock()
    headers = {"authorization": f"Bearer {API_KEY}"}

    async def session(
        client: httpx.AsyncClient, number: int, turns: list[list[dict[str, str]]]
    ) -> list[str]:
        replicas = []
        async with gate:
            for turn, messages in enumerate(turns):
                if turn:
                    await asyncio.sleep(THINK_S)
                proxy = proxies[(starts[number] + turn) % len(proxies)]
                body = {"model": "scripted", "messages": messages, "max_tokens": 16}
                sent = {**headers, "x-session-id": f"{tag}-{number}"}
                async with one_at_a_time:
                    reply = await client.post(
                        f"{proxy.base_url}/chat/completions", json=body, headers=sent
                    )
                assert reply.status_code == 200, reply.text
                replicas.append(reply.headers["x-scripted-replica"])
        return replicas

    async with httpx.AsyncClient(timeout=30) as client:
        return list(
            await asyncio.gather(
                *(session(client, n, turns) for n, turns in enumerate(workload.histories()))
            )
        )


def hit_share(group: list[Replica]) -> float:
    """Prompt tokens the replicas found in their prefix cache, over all prompt tokens."""
    stats = [httpx.get(f"http://127.0.0.1:{r.port}/scripted/stats").json() for r in group]
    return sum(s["cached_tokens"] for s in stats) / sum(s["prompt_tokens"] for s in stats)


def locality(sessions: list[list[str]]) -> float:
    """The share of turns their session's most used replica served."""
    modal = sum(Counter(replicas).most_common(1)[0][1] for replicas in sessions)
    return modal / sum(len(replicas) for replicas in sessions)


def _sharing(redis_server: RedisProcess, database: int, **more: str) -> dict[str, str]:
    return {
        "TASKYARD_PROXY_REDIS_SYNC": "true",
        "TASKYARD_REDIS_URL": redis_server.url(database),
        "TASKYARD_PROXY_PLACEMENT_SYNC_S": SYNC_S,
        **more,
    }


def _two_sharing(proxy: ProxyFactory, upstreams: str, env: dict[str, str]) -> list[ProxyProcess]:
    pair = [proxy(upstreams, env=env) for _ in range(2)]
    wait_until(lambda: all(metric(p, "taskyard_proxy_peers") == 1 for p in pair))
    return pair


@pytest.fixture
def own_redis(procs: Processes) -> RedisProcess:
    return RedisProcess(procs)


def test_two_proxies_sharing_reach_one_proxys_prefix_hit_share(
    replicas: ReplicaFactory, proxy: ProxyFactory, own_redis: RedisProcess
) -> None:
    workload = Workload(sessions=32, turns=5, at_once=8)
    alone = replicas(4, *PREFIX_CACHE)
    single = run_sessions(workload, [proxy(upstreams_of(alone), env=_sharing(own_redis, 1))], "s")
    fresh = replicas(4, *PREFIX_CACHE)  # the same sessions again, on cold caches
    pair = _two_sharing(proxy, upstreams_of(fresh), _sharing(own_redis, 2))
    shared = run_sessions(workload, pair, "s")
    one, two = hit_share(alone), hit_share(fresh)
    assert one > 0.5  # the workload is one where routing matters
    assert two >= 0.95 * one, (one, two, locality(single), locality(shared))


def test_a_sessions_turns_stay_on_one_replica_across_proxies_and_redis_may_go(
    replicas: ReplicaFactory, proxy: ProxyFactory, own_redis: RedisProcess
) -> None:
    # No slow-replica moves either: nothing but a disagreement between the proxies could send
    # a turn elsewhere.
    workload = Workload(sessions=24, turns=4, at_once=8)
    group = replicas(4)
    pair = _two_sharing(
        proxy, upstreams_of(group), _sharing(own_redis, 3, TASKYARD_PROXY_SLOW_FACTOR="0")
    )
    together = run_sessions(workload, pair, "before")
    assert all(len(set(replicas)) == 1 for replicas in together), together
    assert len({replicas[0] for replicas in together}) == 4  # and the sessions spread

    own_redis.stop()
    failing = 'taskyard_proxy_errors_total{kind="placement_sync"}'
    wait_until(lambda: all(metric(p, failing, absent=0) > 0 for p in pair))
    alone = run_sessions(workload, pair, "down")  # every turn answered: routing goes on
    for sessions in ([s[0::2] for s in alone], [s[1::2] for s in alone]):
        assert all(len(set(turns)) == 1 for turns in sessions), alone  # each proxy's own hold

    own_redis.start()
    syncs = [metric(p, "taskyard_proxy_placement_syncs_total") for p in pair]
    wait_until(
        lambda: all(
            metric(p, "taskyard_proxy_placement_syncs_total") > n + 2
            for p, n in zip(pair, syncs, strict=True)
        )
    )
    again = run_sessions(workload, pair, "after")
    assert all(len(set(replicas)) == 1 for replicas in again), again
