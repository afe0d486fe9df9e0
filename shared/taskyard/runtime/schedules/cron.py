"""When a schedule runs: its cron checked (`parse_cron`), and, at a tick, what to do about the
run times that came due (`decide`): a pure decision over the clock it is handed.

A run time is on time while the tick comes within `grace_s` of it; older ones were missed
(beat was down, or its job waited). At most one run per tick, whatever the policy: a schedule
never bursts to catch up. `run_once` runs late once for everything it missed; `skip` runs only
an on-time time and lets missed ones go.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

from croniter import CroniterBadCronError, CroniterBadDateError, CroniterNotAlphaError, croniter

__all__ = ["Decision", "MissedPolicy", "decide", "next_run", "parse_cron"]

MissedPolicy = Literal["run_once", "skip"]
_GAPS_CHECKED = 16  # fire times looked at for the shortest interval
_COUNT_CAP = 10_000
_CRON_ERRORS = (CroniterBadCronError, CroniterBadDateError, CroniterNotAlphaError, ValueError)


@dataclass(frozen=True, slots=True)
class Decision:
    """At one tick: whether to run (for run time `fire_at`), how many run times go unrun,
    and the schedule's next run time."""

    run: bool
    fire_at: float
    missed: int
    next_at: float
    late: bool  # the run (or the skip) is for a time past its grace


def parse_cron(expr: str, min_interval_s: float, now: float) -> str:
    """The cron, normalised, or ValueError saying what is wrong with it: not a cron (five
    fields, a sixth for seconds), never fires, or fires more often than `min_interval_s`."""
    expr = " ".join(expr.split())
    try:
        times = croniter(expr, now)
        fires = [times.get_next(float) for _ in range(_GAPS_CHECKED + 1)]
    except CroniterBadDateError as exc:
        raise ValueError(f"{expr!r} never fires") from exc
    except _CRON_ERRORS as exc:
        raise ValueError(
            f"{expr!r} is not a cron expression (five fields, a sixth for seconds): {exc}"
        ) from exc
    shortest = min(later - earlier for earlier, later in pairwise(fires))
    if shortest < min_interval_s:
        raise ValueError(
            f"{expr!r} fires {shortest:g} s apart at times; the least interval allowed is "
            f"{min_interval_s:g} s"
        )
    return expr


def next_run(expr: str, after: float) -> float:
    """The cron's first run time strictly after `after`."""
    return float(croniter(expr, after).get_next(float))


def decide(expr: str, due_at: float, now: float, grace_s: float, missed: MissedPolicy) -> Decision:
    """What a tick at `now` does for a schedule whose next run time is `due_at` (<= now)."""
    times = croniter(expr, now)  # one iterator: the run time after now, then the one before
    upcoming = float(times.get_next(float))
    latest = max(due_at, float(times.get_prev(float)))
    on_time = now - latest <= grace_s
    run = on_time or missed == "run_once"
    return Decision(run=run, fire_at=latest, missed=_count(expr, due_at, latest) - int(run),
                    next_at=upcoming, late=not on_time)  # fmt: skip


def _count(expr: str, first: float, last: float) -> int:
    """Run times from `first` to `last`, both counted; past `_COUNT_CAP`, the cap (a long
    outage of a frequent cron would otherwise take a while to count)."""
    if last <= first:
        return 1  # the usual tick: only the run time due
    times, n = croniter(expr, first), 1
    while n < _COUNT_CAP and times.get_next(float) <= last:
        n += 1
    return n
