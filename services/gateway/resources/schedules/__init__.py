"""Schedules (`/v1/schedules`): cron schedules, each submitting a task at its run times."""
