"""The fleet view: this instance's placements merged with the others', on a fake clock, and
affinity routing over it on plain stub replicas (no Redis: the exchange is done by hand)."""

from __future__ import annotations

import random
from collections import Counter

from proxy_support import StubReplica, route_key, stub_group

from services.llm_proxy.routing.fleet import FleetView, PeerLoad
from services.llm_proxy.routing.placements import Placement
from services.llm_proxy.routing.policies import AffinityPolicy, ReplicaState


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _view(clock: Clock, name: str, publish: bool = True) -> FleetView[ReplicaState]:
    return FleetView(live_s=60, peer_ttl_s=5, clock=clock, instance=name, publish=publish)


def _exchange(views: list[FleetView[ReplicaState]], clock: Clock) -> None:
    """What the Redis sync does for them: each one's news and load to every other."""
    news = {view.instance: view.take_news() for view in views}
    loads = {view.instance: PeerLoad(clock(), {}) for view in views}
    for view in views:
        for placed in (news[other.instance] for other in views if other is not view):
            for key, p in placed.items():
                view.learn(key, Placement(p.replica, p.placed_at, p.seen, p.origin))
        view.set_peers(loads)


R0, R1, R2 = StubReplica("r0"), StubReplica("r1"), StubReplica("r2")


def test_a_key_placed_elsewhere_is_followed_while_it_is_live() -> None:
    clock = Clock()
    view = _view(clock, "a")
    view.learn(("m", 7), Placement(R1, placed_at=clock(), seen=clock(), origin="b"))
    assert view.get(("m", 7)) is R1
    clock.now += 59
    assert view.get(("m", 7)) is R1
    clock.now += 2  # 61 s after the other instance last used it
    assert view.get(("m", 7)) is None


def test_each_live_key_counts_once_wherever_it_was_placed() -> None:
    clock = Clock()
    view = _view(clock, "a")
    t = clock()
    view.put(("m", 1), R0)  # placed here
    view.learn(("m", 2), Placement(R0, t, t, "b"))  # placed there
    assert view.live(R0) == 2
    view.put(("m", 2), R0)  # followed here: still one key
    view.learn(("m", 2), Placement(R0, t, t + 1, "b"))  # and used there again
    assert view.live(R0) == 2
    view.learn(("m", 1), Placement(R1, t + 1, t + 1, "b"))  # moved there
    assert (view.live(R0), view.live(R1), view.get(("m", 1))) == (1, 1, R1)


def test_a_key_used_elsewhere_stays_live_here() -> None:
    clock = Clock()
    view = _view(clock, "a")
    view.put(("m", 1), R0)
    placed = clock()
    clock.now += 50
    view.learn(("m", 1), Placement(R0, placed, clock(), "a"))  # another follows it, says so
    clock.now += 20  # 70 s after this instance used it, 20 s after the other did
    assert view.get(("m", 1)) is R0 and view.live(R0) == 1


def test_a_placement_unused_for_the_live_window_is_not_learnt() -> None:
    clock = Clock()
    view = _view(clock, "a")
    view.learn(("m", 1), Placement(R1, clock() - 70, clock() - 61, "b"))
    assert view.get(("m", 1)) is None and view.live(R1) == 0


def test_the_latest_placement_wins_whoever_made_it() -> None:
    clock = Clock()
    view = _view(clock, "a")
    view.put(("m", 1), R0)
    view.learn(("m", 1), Placement(R1, clock() + 0.05, clock() + 0.05, "b"))  # placed after
    assert view.get(("m", 1)) is R1
    view.put(("m", 2), R0)
    view.learn(("m", 2), Placement(R1, clock() - 0.05, clock(), "b"))  # placed before ours
    assert view.get(("m", 2)) is R0
    view.learn(("m", 3), Placement(R2, clock(), clock(), "b"))
    view.learn(("m", 3), Placement(R1, clock(), clock(), "c"))  # a tie: the later name
    assert view.get(("m", 3)) is R1


def test_following_a_placement_keeps_its_time_and_is_published_as_a_refresh() -> None:
    clock = Clock()
    view = _view(clock, "a")
    view.learn(("m", 1), Placement(R1, placed_at=clock() - 10, seen=clock() - 10, origin="b"))
    clock.now += 1
    view.put(("m", 1), R1)
    (placed,) = view.take_news().values()
    assert (placed.replica, placed.placed_at, placed.origin) == (R1, clock() - 11, "b")
    assert placed.seen == clock()


def test_news_are_new_or_moved_keys_and_refreshes_every_quarter_of_the_live_window() -> None:
    clock = Clock()
    view = _view(clock, "a")
    view.put(("m", 1), R0)
    assert list(view.take_news()) == [("m", 1)]
    clock.now += 10
    view.put(("m", 1), R0)  # used again, placed as before: nothing to say yet
    assert view.take_news() == {}
    view.put(("m", 1), R1)  # moved
    assert view.take_news()[("m", 1)].replica is R1
    clock.now += 15  # a quarter of 60 s since it was last published
    view.put(("m", 1), R1)
    assert list(view.take_news()) == [("m", 1)]


def test_news_a_failed_sync_gives_back_do_not_overwrite_newer_ones() -> None:
    clock = Clock()
    view = _view(clock, "a")
    view.put(("m", 1), R0)
    view.put(("m", 2), R0)
    failed = view.take_news()
    view.put(("m", 1), R1)  # moved while the sync was failing
    view.give_back(failed)
    news = view.take_news()
    assert (news[("m", 1)].replica, news[("m", 2)].replica) == (R1, R0)


def test_a_view_no_sync_reads_keeps_no_news() -> None:
    view = _view(Clock(), "a", publish=False)
    for i in range(100):
        view.put(("m", i), R0)
    assert view.take_news() == {}


def test_in_flight_is_own_plus_what_each_live_peer_said_last_and_keys_are_own() -> None:
    clock = Clock()
    view = _view(clock, "a")
    view.put(("m", 1), R0)
    view.set_peers({
        "b": PeerLoad(clock(), {R0: 2.5, R1: 1.0}),
        "c": PeerLoad(clock() - 4, {R0: 0.5}),
        "a": PeerLoad(clock(), {R0: 50.0}),  # its own, read back
    })  # fmt: skip
    assert (view.in_flight_elsewhere(R0), view.in_flight_elsewhere(R1)) == (3.0, 1.0)
    assert (view.live(R0), view.live(R1), view.peers) == (1, 0, 2)
    clock.now += 2  # c last said something 6 s ago: past the 5 s TTL
    view.expire_peers()
    assert (view.in_flight_elsewhere(R0), view.peers) == (2.5, 1)
    clock.now += 10  # nothing heard from anyone (Redis down): this instance's own state
    view.expire_peers()
    assert (view.in_flight_elsewhere(R0), view.in_flight_elsewhere(R1), view.peers) == (0, 0, 0)


def test_the_bounded_load_counts_requests_other_instances_have_in_flight() -> None:
    clock = Clock()
    group = stub_group(3)
    view = _view(clock, "a")
    policy = AffinityPolicy(load_factor=1.25, view=view)
    home = policy.route(group, route_key("s"), ())
    assert home is not None
    view.set_peers({"b": PeerLoad(clock(), {home: 10.0})})
    spill = policy.route(group, route_key("s"), ())
    assert spill is not None and spill is not home  # busy through the other instance
    view.set_peers({})
    assert policy.route(group, route_key("s"), ()) is home  # the key stayed home


def _route_sessions(share: bool) -> tuple[int, Counter[str]]:
    """400 sessions of 4 turns, 16 at a time, each turn through either of two instances (at
    random); with `share`, a sync between turns. The sessions whose turns split over
    replicas, and the sessions per replica."""
    rng, clock, group = random.Random(7), Clock(), stub_group(4)
    views = [_view(clock, "a"), _view(clock, "b")]
    policies = [AffinityPolicy(view=view) for view in views]
    picks: dict[int, set[str]] = {}
    for first in range(0, 400, 16):
        for _ in range(4):
            for session in range(first, first + 16):
                replica = rng.choice(policies).route(group, route_key(f"s{session}"), ())
                assert replica is not None
                picks.setdefault(session, set()).add(replica.name)
                clock.now += 0.01
            if share:
                _exchange(views, clock)
    split = sum(len(replicas) > 1 for replicas in picks.values())
    return split, Counter(min(replicas) for replicas in picks.values())


def test_two_instances_sharing_route_like_one() -> None:
    split, homes = _route_sessions(share=True)
    assert split == 0
    assert max(homes.values()) <= 1.05 * 100  # spread about as evenly as one instance does
    split, _ = _route_sessions(share=False)
    assert split > 100  # each instance balancing its own view: they disagree
