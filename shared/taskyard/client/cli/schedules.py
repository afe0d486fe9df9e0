"""`taskyard schedules`: list your cron schedules, add one, show one, list its runs, delete one."""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC, datetime
from typing import Any, get_args

from taskyard.client import MissedRuns, SessionBusy
from taskyard.client.cli.support import Subparsers, add_command, open_client, print_json

__all__ = ["register"]


def register(commands: Subparsers) -> None:
    """`schedules` and its subcommands (alone, it lists)."""
    schedules = add_command(commands, "schedules",
                            "your cron schedules: list (the default), add, show, runs, delete",
                            json_output=True)  # fmt: skip
    schedules.set_defaults(run=_list)
    sub = schedules.add_subparsers(required=False)

    add = add_command(sub, "add", "submit a task at each run time of a cron (UTC)",
                      json_output=True)  # fmt: skip
    add.add_argument("cron", help='five fields ("0 9 * * 1-5"), six with seconds, or @hourly')
    add.add_argument("text", help="what each run asks")
    add.add_argument("--session", default=None, help="one session for every run (default: fresh)")
    add.add_argument("--agent", type=json.loads, default=None, help="the agent, as JSON")
    add.add_argument("--name", default=None, help="a name to know it by")
    add.add_argument(
        "--missed", choices=get_args(MissedRuns), default="run_once",
        help="run times missed while the scheduler was down: one late run (run_once, the "
        "default) or none (skip)",
    )  # fmt: skip
    add.add_argument("--if-busy", choices=get_args(SessionBusy), default=None,
                     help="while --session runs another task (see submit --if-busy)")  # fmt: skip
    add.set_defaults(run=_add)

    show = add_command(sub, "show", "a schedule: its cron, task, next run", json_output=True)
    show.add_argument("schedule_id")
    show.set_defaults(run=_show)

    runs = add_command(sub, "runs", "a schedule's latest runs, newest first", json_output=True)
    runs.add_argument("schedule_id")
    runs.add_argument("--limit", type=int, default=20, help="how many (default %(default)s)")
    runs.set_defaults(run=_runs)

    delete = add_command(sub, "delete", "stop a schedule (the tasks it made stay)")
    delete.add_argument("schedule_id")
    delete.set_defaults(run=_delete)


def _list(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        found = client.list_schedules()
    if args.json:
        print_json({"schedules": found})
        return 0
    for schedule in found:
        print(_line(schedule))
    return 0


def _line(schedule: dict[str, Any]) -> str:
    name = f"  {schedule['name']}" if schedule.get("name") else ""
    return (f"{schedule['id']}  {schedule['cron']!r}  next {_when(schedule['next_run_at'])}  "
            f"{schedule['runs']} runs, {schedule['missed_runs']} missed{name}")  # fmt: skip


def _when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _add(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        made = client.create_schedule(
            args.cron, args.text, session_id=args.session, agent=args.agent,
            missed=args.missed, name=args.name, if_session_busy=args.if_busy,
        )  # fmt: skip
    if args.json:
        print_json(made)
    else:
        print(_line(made))
    return 0


def _show(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        schedule = client.schedule(args.schedule_id)
    if args.json:
        print_json(schedule)
        return 0
    print(_line(schedule))
    task = schedule["task"]
    print(f"  task: {task['input']!r} in {task.get('session_id') or 'a fresh session each run'}; "
          f"missed runs: {schedule['missed']}")  # fmt: skip
    return 0


def _runs(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        found = client.schedule_runs(args.schedule_id, args.limit)
    if args.json:
        print_json({"runs": found})
        return 0
    now = time.time()
    for run in found:
        late = " late" if run["late"] else ""
        what = f"{run['task_id']} {run['status']}" if run["task_id"] else run["outcome"]
        why = f": {run['reason']}" if run.get("reason") else ""
        missed = f" ({run['missed']} missed)" if run["missed"] else ""
        print(f"{_when(run['fire_at'])}{late}  {what}{why}{missed}  [{int(now - run['at'])}s ago]")
    return 0


def _delete(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        client.delete_schedule(args.schedule_id)
    print(f"deleted {args.schedule_id}")
    return 0
