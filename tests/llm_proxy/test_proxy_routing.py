"""Routing policies as pure decisions, on plain stub replicas."""

from __future__ import annotations

from collections import Counter

import pytest
from proxy_support import StubGroup, StubReplica, route_key, stub_group

from services.llm_proxy.routing.placements import Placements
from services.llm_proxy.routing.policies import (
    AffinityPolicy,
    LeastOutstandingPolicy,
    RoundRobinPolicy,
    make_policy,
)


def test_a_key_always_lands_on_the_same_replica() -> None:
    group = stub_group(3)
    policy = AffinityPolicy()
    for session in ("a", "b", "c", "d"):
        picks = {policy.route(group, route_key(session), ()) for _ in range(5)}
        assert len(picks) == 1


def test_keys_spread_over_replicas_by_weight() -> None:
    group = StubGroup(
        [StubReplica("r0", weight=1), StubReplica("r1", weight=1), StubReplica("r2", weight=2)]
    )
    policy = AffinityPolicy()
    counts = Counter(policy.route(group, route_key(f"s{i}"), ()).name for i in range(4000))
    assert counts["r2"] > 1.5 * counts["r0"]
    assert min(counts.values()) > 600


def test_removing_a_replica_moves_only_its_keys() -> None:
    group = stub_group(4)
    policy = AffinityPolicy()
    before = {i: policy.route(group, route_key(f"s{i}"), ()) for i in range(500)}
    group.replicas[1].healthy = False
    after = {i: policy.route(group, route_key(f"s{i}"), ()) for i in range(500)}
    moved = [i for i in before if before[i] is not after[i]]
    assert moved and all(before[i] is group.replicas[1] for i in moved)


def test_an_overloaded_home_spills_requests_but_keeps_its_key() -> None:
    group = stub_group(3)
    policy = AffinityPolicy(load_factor=1.25)
    home = policy.route(group, route_key("s"), ())
    assert home is not None
    home.in_flight = 10  # the others carry nothing: far above 1.25x the mean
    spills = {policy.route(group, route_key("s"), ()) for _ in range(3)}
    assert len(spills) == 1 and home not in spills  # always the next on the ring
    home.in_flight = 0
    assert policy.route(group, route_key("s"), ()) is home


def test_a_slow_or_unhealthy_home_loses_its_key_for_good() -> None:
    group = stub_group(3)
    policy = AffinityPolicy()
    home = policy.route(group, route_key("s"), ())
    assert home is not None
    home.healthy = False
    new_home = policy.route(group, route_key("s"), ())
    home.healthy = True
    assert new_home is not home and policy.route(group, route_key("s"), ()) is new_home


def test_bounded_load_keeps_every_replica_near_the_mean() -> None:
    group = stub_group(3)
    policy = AffinityPolicy(load_factor=1.25)
    for _ in range(60):  # one hot session: without the bound all 60 would pile on one replica
        replica = policy.route(group, route_key("hot"), ())
        assert replica is not None
        replica.in_flight += 1
    loads = [r.in_flight for r in group.replicas]
    assert max(loads) <= 1.25 * 60 / 3 + 1


def test_excluded_unhealthy_and_full_replicas_are_never_chosen() -> None:
    group = stub_group(3)
    group.replicas[0].healthy = False
    group.replicas[1].in_flight = group.replicas[1].max_in_flight
    for policy in (AffinityPolicy(), RoundRobinPolicy(), LeastOutstandingPolicy()):
        for i in range(20):
            assert policy.route(group, route_key(f"k{i}"), ()) is group.replicas[2]
        assert policy.route(group, route_key("k"), (group.replicas[2],)) is None


def test_a_much_slower_preferred_replica_is_skipped() -> None:
    group = stub_group(3, latency_ms=30.0)
    policy = AffinityPolicy()
    preferred = policy.route(group, route_key("s"), ())
    assert preferred is not None
    preferred.latency_ms = 300.0
    assert policy.route(group, route_key("s"), ()) is not preferred


def test_small_latency_gaps_do_not_break_affinity() -> None:
    group = stub_group(3, latency_ms=0.2)
    policy = AffinityPolicy()
    preferred = policy.route(group, route_key("s"), ())
    assert preferred is not None
    preferred.latency_ms = 5.0  # 25x, but well under the floor where it means anything
    assert policy.route(group, route_key("s"), ()) is preferred


def test_without_a_key_least_outstanding_decides() -> None:
    group = stub_group(3)
    group.replicas[0].in_flight = 2
    group.replicas[1].in_flight = 1
    group.replicas[2].in_flight = 3
    assert AffinityPolicy().route(group, None, ()) is group.replicas[1]
    assert LeastOutstandingPolicy().route(group, route_key("x"), ()) is group.replicas[1]


def test_least_outstanding_counts_per_unit_of_weight() -> None:
    group = StubGroup(
        [StubReplica("r0", weight=1, in_flight=2), StubReplica("r1", weight=4, in_flight=4)]
    )
    assert LeastOutstandingPolicy().route(group, None, ()) is group.replicas[1]


def test_round_robin_takes_turns_whatever_the_key() -> None:
    group = stub_group(3)
    policy = RoundRobinPolicy()
    picks = [policy.route(group, route_key("same"), ()) for _ in range(6)]
    assert picks == group.replicas * 2


def test_policies_are_chosen_by_name() -> None:
    assert isinstance(make_policy("round_robin", 1.25), RoundRobinPolicy)
    assert isinstance(make_policy("affinity", 1.25), AffinityPolicy)
    with pytest.raises(ValueError, match="unknown routing policy"):
        make_policy("random", 1.25)


def test_new_keys_spread_evenly_over_replicas() -> None:
    group = stub_group(4)
    policy = AffinityPolicy()
    counts = Counter(policy.route(group, route_key(f"session-{i}"), ()).name for i in range(400))
    assert set(counts.values()) == {100}  # plain hashing would leave them uneven


def test_placements_expire_and_count_live_keys() -> None:
    now = [0.0]
    placements: Placements[str] = Placements(live_s=10, clock=lambda: now[0])
    placements.put("a", "r0")
    placements.put("b", "r0")
    placements.put("a", "r1")
    assert (placements.live("r0"), placements.live("r1")) == (1, 1)
    now[0] = 11.0
    assert placements.get("a") is None and placements.live("r1") == 0
