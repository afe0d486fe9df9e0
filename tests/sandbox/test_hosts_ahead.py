"""How many fork-server hosts a tenant's sessions start ahead of need (`hosts_ahead`): a
quarter of a host free at rest, and in a burst enough seats on the way to last out two host
starts at the rate sessions arrive."""

from __future__ import annotations

from taskyard.sandbox.docker.hosts import hosts_ahead


def test_at_rest_the_next_host_starts_once_three_quarters_are_taken() -> None:
    assert hosts_ahead(free=17, starting=0, capacity=64, rate=0.0, start_s=2.0) == 0
    assert hosts_ahead(free=15, starting=0, capacity=64, rate=0.0, start_s=2.0) == 1
    assert hosts_ahead(free=15, starting=1, capacity=64, rate=0.0, start_s=2.0) == 0


def test_a_burst_starts_as_many_as_its_rate_asks_for_while_one_starts() -> None:
    # 50 sessions/s, a host in 3 s: 300 seats wanted; 60 free, none coming: 4 more of 64.
    assert hosts_ahead(free=60, starting=0, capacity=64, rate=50.0, start_s=3.0) == 4
    assert hosts_ahead(free=60, starting=2, capacity=64, rate=50.0, start_s=3.0) == 2
    assert hosts_ahead(free=60, starting=4, capacity=64, rate=50.0, start_s=3.0) == 0


def test_never_more_than_four_start_at_once() -> None:
    assert hosts_ahead(free=0, starting=0, capacity=8, rate=1000.0, start_s=5.0) == 4
    assert hosts_ahead(free=0, starting=3, capacity=8, rate=1000.0, start_s=5.0) == 1
    assert hosts_ahead(free=0, starting=9, capacity=8, rate=1000.0, start_s=5.0) == 0
