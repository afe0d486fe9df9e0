"""Cron schedules: a tenant's task submitted at each run time of a cron, on Celery beat."""

from taskyard.runtime.schedules.cron import Decision, MissedPolicy, decide, next_run, parse_cron
from taskyard.runtime.schedules.spec import RunOutcome, Schedule, ScheduleRequest, ScheduleRun

__all__ = [
    "Decision",
    "MissedPolicy",
    "RunOutcome",
    "Schedule",
    "ScheduleRequest",
    "ScheduleRun",
    "decide",
    "next_run",
    "parse_cron",
]
