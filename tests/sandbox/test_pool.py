"""The warm pool: its size as a pure decision over session starts (a fake clock), and the pool
itself over a stub kernel starter: concurrent refills, growth with a burst, shrinking when
the burst is over, a starter that fails."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from waiting import wait_until

from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.sandbox.demand import Demand, PoolBounds
from taskyard.sandbox.pool import WarmPool


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class StubChannel:
    """A started kernel as far as the pool can tell."""

    def __init__(self, session_key: str | None) -> None:
        self.session_key = session_key
        self.closed = False

    def alive(self) -> bool:
        return not self.closed

    def close(self) -> None:
        self.closed = True

    def send(self, message: dict[str, Any], deadline: float) -> None: ...

    def receive(self, deadline: float) -> dict[str, Any] | None: ...

    def exit_reason(self) -> str:
        return ""


class Starter:
    """Starts stub kernels, the pool's each taking `delay_s` (a session's own at once); counts
    how many of the pool's start at once."""

    def __init__(self, delay_s: float = 0.05) -> None:
        self.delay_s = delay_s
        self.started: list[StubChannel] = []
        self.running = 0
        self.most_at_once = 0
        self.fail = False
        self._lock = threading.Lock()

    def __call__(self, session_key: str | None) -> StubChannel:
        pooled = session_key is None
        with self._lock:
            self.running += pooled
            self.most_at_once = max(self.most_at_once, self.running)
        try:
            time.sleep(self.delay_s if pooled else 0)
            if self.fail:
                raise RuntimeError("the engine is down")
            channel = StubChannel(session_key)
            with self._lock:
                self.started.append(channel)
            return channel
        finally:
            with self._lock:
                self.running -= pooled


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_the_target_is_the_busiest_second_of_the_window_within_bounds(clock: Clock) -> None:
    demand = Demand(PoolBounds(minimum=2, maximum=10, window_s=60), clock)
    assert demand.target() == 2  # nothing yet: the minimum
    for _ in range(5):
        demand.record()
    clock.now += 1
    for _ in range(3):
        demand.record()
    assert demand.target() == 5
    clock.now += 58.5  # the busy second is still inside the window
    assert demand.target() == 5
    clock.now += 1  # now it has left it; the quieter one has not
    assert demand.target() == 3
    for _ in range(40):
        demand.record()
    assert demand.target() == 10  # never past the maximum
    clock.now += 120
    assert demand.target() == 2


def test_a_burst_across_a_seconds_boundary_counts_whole(clock: Clock) -> None:
    demand = Demand(PoolBounds(minimum=1, maximum=30), clock)
    clock.now = 1000.5
    for _ in range(20):  # twenty sessions in one second, half of them after 1001.0
        demand.record()
        clock.now += 0.049
    assert demand.target() == 20
    clock.now += 5
    demand.record()  # a lone one later does not change the busiest second
    assert demand.target() == 20


def test_bounds_come_from_the_settings() -> None:
    settings = ToolWorkerSettings(
        sandbox_warm_pool=2, sandbox_warm_pool_max=30, sandbox_warm_starts=6
    )
    assert PoolBounds.from_settings(settings) == PoolBounds(2, 30, 6, 60.0)
    assert not PoolBounds.from_settings(
        ToolWorkerSettings(sandbox_warm_pool=0)
    ).enabled  # 0: no pool
    # A maximum below the minimum is the minimum (an old SANDBOX_WARM_POOL=40 keeps working).
    assert PoolBounds.from_settings(ToolWorkerSettings(sandbox_warm_pool=40)).maximum == 40


def test_a_burst_grows_the_pool_with_starts_in_parallel(clock: Clock) -> None:
    starter = Starter(delay_s=0.2)
    pool = WarmPool(starter, PoolBounds(minimum=1, maximum=8, starters=4), clock)
    try:
        wait_until(lambda: pool.state().ready == 1, "the minimum")
        taken = [pool.take(f"t:s{n}") for n in range(6)]  # six new sessions in one second
        assert taken[0].session_key is None  # the warm one
        assert all(channel.alive() for channel in taken)
        assert pool.state().target == 6
        wait_until(lambda: pool.state().ready == 6, "the pool to grow to the burst")
        assert starter.most_at_once == 4  # its four starters refilled in parallel
    finally:
        pool.close()


def test_an_empty_pool_hands_its_next_kernel_to_a_waiting_session(clock: Clock) -> None:
    starter = Starter(delay_s=0.3)
    pool = WarmPool(starter, PoolBounds(minimum=1, maximum=1, starters=1), clock)
    try:
        wait_until(lambda: pool.state().ready == 1, "the pool to fill")
        assert pool.take("t:first").session_key is None
        wait_until(lambda: pool.state().starting == 1, "the refill to begin")
        assert pool.take("t:second").session_key is None  # the refill, not a start of its own
        assert [c.session_key for c in starter.started] == [None, None]
    finally:
        pool.close()


def test_sessions_past_the_starts_under_way_start_their_own(clock: Clock) -> None:
    starter = Starter(delay_s=0.5)
    pool = WarmPool(starter, PoolBounds(minimum=1, maximum=1, starters=1), clock)
    try:
        wait_until(lambda: pool.state().ready == 1, "the pool to fill")
        pool.take("t:first")
        wait_until(lambda: pool.state().starting == 1, "the refill to begin")
        got: dict[str, str | None] = {}
        takers = [
            threading.Thread(target=lambda k=key: got.update({k: pool.take(k).session_key}))
            for key in ("t:a", "t:b")
        ]
        for taker in takers:
            taker.start()
        for taker in takers:
            taker.join()
        # One took the refill under way; the other did not queue behind it.
        own = [key for taker, key in got.items() if key == taker]
        assert len(own) == 1 and list(got.values()).count(None) == 1
    finally:
        pool.close()


def test_the_pool_shrinks_back_once_the_burst_leaves_the_window(clock: Clock) -> None:
    starter = Starter(delay_s=0.0)
    pool = WarmPool(starter, PoolBounds(minimum=1, maximum=8, starters=2, window_s=10), clock)
    try:
        for n in range(5):
            pool.take(f"t:s{n}")
        wait_until(lambda: pool.state().ready == 5, "the pool to grow")
        clock.now += 11
        wait_until(lambda: pool.state().ready == 1, "the pool to shrink")
        stopped = [c for c in starter.started if c.closed and c.session_key is None]
        assert len(stopped) == 4
    finally:
        pool.close()


def test_a_warm_kernel_that_died_is_not_handed_out(clock: Clock) -> None:
    starter = Starter(delay_s=0.0)
    pool = WarmPool(starter, PoolBounds(minimum=1, maximum=1, starters=1), clock)
    try:
        wait_until(lambda: pool.state().ready == 1, "the pool to fill")
        dead = starter.started[0]
        dead.closed = True  # it died while waiting
        channel = pool.take("t:s")
        assert channel.alive() and channel is not dead
    finally:
        pool.close()


def test_a_failing_engine_leaves_sessions_their_own_starts(
    clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("taskyard.sandbox.pool._FAILURE_PAUSE_S", 0.05)
    starter = Starter(delay_s=0.0)
    starter.fail = True
    pool = WarmPool(starter, PoolBounds(minimum=2, maximum=2, starters=2), clock)
    try:
        time.sleep(0.1)
        assert pool.state().ready == 0
        starter.fail = False
        assert pool.take("t:s").session_key == "t:s"  # started for the session itself
        wait_until(lambda: pool.state().ready == 2, "the pool to fill once the engine is back")
    finally:
        pool.close()


def test_no_pool_starts_nothing_ahead(clock: Clock) -> None:
    starter = Starter(delay_s=0.0)
    pool = WarmPool(starter, PoolBounds.fixed(0), clock)
    try:
        time.sleep(0.1)
        assert starter.started == []
        assert pool.take("t:s").session_key == "t:s"
        time.sleep(0.1)
        assert len(starter.started) == 1
    finally:
        pool.close()


def test_close_stops_the_warm_kernels(clock: Clock) -> None:
    starter = Starter(delay_s=0.0)
    pool = WarmPool(starter, PoolBounds.fixed(3), clock)
    wait_until(lambda: pool.state().ready == 3, "the pool to fill")
    pool.close()
    assert all(channel.closed for channel in starter.started)
