"""A schedule's cron, checked with its reason, and the decision a tick takes (pure)."""

from __future__ import annotations

import pytest

from taskyard.runtime.schedules import MissedPolicy, decide, parse_cron

HOUR = 3600.0


@pytest.mark.parametrize(
    ("cron", "says"),
    [
        ("61 * * * *", "is not a cron expression"),
        ("every day", "is not a cron expression"),
        ("0 0 30 2 *", "never fires"),
        ("* * * * * */10", "fires 10 s apart at times; the least interval allowed is 60 s"),
    ],
)
def test_a_bad_cron_is_refused_with_its_reason(cron: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_cron(cron, 60, 0)


def test_a_good_cron_is_normalised_and_seconds_pass_a_lower_floor() -> None:
    assert parse_cron("0  9 * *   1-5", 60, 0) == "0 9 * * 1-5"
    assert parse_cron("@hourly", 60, 0) == "@hourly"
    assert parse_cron("* * * * * */2", 1, 0) == "* * * * * */2"


def test_an_on_time_run_runs_whatever_the_policy() -> None:
    policies: list[MissedPolicy] = ["run_once", "skip"]
    for missed in policies:
        decision = decide("@hourly", HOUR, HOUR + 5, 60, missed)
        assert (decision.run, decision.late, decision.missed) == (True, False, 0)
        assert decision.next_at == 2 * HOUR


def test_the_latest_run_time_on_time_runs_and_the_older_ones_are_missed() -> None:
    decision = decide("@hourly", HOUR, 5 * HOUR + 30, 60, "skip")
    assert (decision.run, decision.fire_at, decision.missed) == (True, 5 * HOUR, 4)
