"""`taskyard` commands on tasks: submit one and follow it, reattach to one, show one, list
them, cancel one, list (and save) what its tools made."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import uuid
from pathlib import Path
from typing import get_args

from taskyard.client import SessionBusy
from taskyard.client.cli.live import follow_here
from taskyard.client.cli.support import Subparsers, add_command, age, more, open_client, print_json

__all__ = ["register"]


def register(commands: Subparsers) -> None:
    """submit, follow, get, tasks, cancel, artifacts."""
    _register_submit(commands)

    follow = add_command(commands, "follow",
                         "reattach to a task: its transcript so far, then live")  # fmt: skip
    follow.add_argument("task_id")
    _add_ask(follow)
    follow.set_defaults(run=_follow)

    get = add_command(commands, "get", "print a task's status and result", json_output=True)
    get.add_argument("task_id")
    get.set_defaults(run=_get)

    tasks = add_command(commands, "tasks", "list your recent tasks, newest first",
                        json_output=True)  # fmt: skip
    tasks.add_argument("--status", default=None, help="only tasks in this status")
    tasks.add_argument("--session", default=None, help="only tasks of this session")
    tasks.add_argument("--limit", type=int, default=20, help="how many (default %(default)s)")
    tasks.add_argument("--cursor", help="the next page, as the last one said")
    tasks.set_defaults(run=_tasks)

    cancel = add_command(commands, "cancel",
                         "end a task now (its session passes to the next one)")  # fmt: skip
    cancel.add_argument("task_id")
    cancel.set_defaults(run=_cancel)

    artifacts = add_command(commands, "artifacts",
                            "list what a task's tools made; --save to download",
                            json_output=True)  # fmt: skip
    artifacts.add_argument("task_id")
    artifacts.add_argument("--save", type=Path, metavar="DIR", help="download them into DIR")
    artifacts.set_defaults(run=_artifacts)


def _register_submit(commands: Subparsers) -> None:
    submit = add_command(commands, "submit", "submit a task and follow it live")
    submit.add_argument("text", help="what to ask")
    submit.add_argument("--session", default=None, help="session id (shares memory, interpreter)")
    submit.add_argument("--no-follow", action="store_true", help="print the id and return")
    example = '{"tools": [...], "approval": {"tools": "*"}}'
    submit.add_argument("--agent", type=json.loads, default=None,
                        help=f"the agent, as JSON: {example}")  # fmt: skip
    _add_ask(submit)
    submit.add_argument(
        "--file", action="append", default=[], type=Path, metavar="LOCAL",
        help="upload this file to the session first and tell the task it is there (repeatable)",
    )  # fmt: skip
    submit.add_argument(
        "--artifacts", type=Path, metavar="DIR",
        help="save what the task's tools make (figures, tables) into DIR as they come",
    )  # fmt: skip
    submit.add_argument(
        "--webhook", metavar="URL",
        help="POST the task's final state there (signed: see webhook-secret)",
    )  # fmt: skip
    submit.add_argument(
        "--if-busy", choices=get_args(SessionBusy), default=None,
        help="while the session runs another task: wait its turn (enqueue), be refused "
        "(reject), or cancel it and start now, keeping its steps in the session's memory "
        "(interrupt) or removing them (rollback); default: the agent's, else enqueue",
    )  # fmt: skip
    submit.add_argument(
        "--deadline", type=_seconds, default=None, metavar="SECONDS",
        help="end the task timed_out after this long (default: the deployment's; at most "
        "your tenant's maximum)",
    )  # fmt: skip
    submit.add_argument(
        "--cancel-on-interrupt", action="store_true",
        help="Ctrl-C cancels the task (by default it goes on without you)",
    )  # fmt: skip
    submit.set_defaults(run=_submit)


def _seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds over 0")
    return seconds


def _add_ask(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--ask", action=argparse.BooleanOptionalAction, default=None,
        help="ask for a decision on each call held for approval (default: when interactive)",
    )  # fmt: skip


def _asks(args: argparse.Namespace) -> bool:
    return sys.stdin.isatty() if args.ask is None else bool(args.ask)


def _submit(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        session: str | None = args.session
        if args.file:  # the uploads need a session: a new one unless one is named
            session = session or uuid.uuid4().hex
            for local in args.file:
                uploaded = client.upload(session, local)
                print(
                    f"uploaded {local} as {uploaded['path']} ({uploaded['size']} bytes)", flush=True
                )
        accepted = client.submit(
            args.text, session_id=session, agent=args.agent,
            webhook={"url": args.webhook} if args.webhook else None,
            files=[local.name for local in args.file], if_session_busy=args.if_busy,
            deadline_s=args.deadline,
        )  # fmt: skip
        print(f"task {accepted['id']} (session {accepted['session_id']})", flush=True)
        if args.no_follow:
            return 0
        return follow_here(
            client, accepted["id"], _asks(args), args.artifacts, cancel=args.cancel_on_interrupt
        )


def _follow(args: argparse.Namespace) -> int:
    ask = _asks(args)
    with open_client(args) as client:
        return follow_here(client, args.task_id, ask)


def _get(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        task = client.get(args.task_id)
    if args.json:
        print_json(task)
        return 0
    print(f"{task['id']}: {task['status']}\nresult: {task['result']}\nerror: {task['error']}")
    for held in task["approvals"]:
        if held["state"] == "pending":
            print(f"waiting for approval: {held['tool']} call {held['call_id']}")
    return 0


def _tasks(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        listed = client.list_tasks(args.limit, args.status, args.session, args.cursor)
    if args.json:
        print_json(listed)
        return 0
    now = time.time()
    for task in listed["tasks"]:
        text = (task.get("input") or "").partition("\n")[0][:50]
        ago = age(now - task["created_at"])
        print(f"{task['id']}  {task['status']:<16} {ago:>4}  {task['session_id'][:20]:<20}  {text}")
    more("tasks", listed["next_cursor"])
    return 0


def _cancel(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        client.cancel(args.task_id)
    print(f"task {args.task_id} cancelled")
    return 0


def _artifacts(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        made = client.artifacts(args.task_id)
        saved: list[Path | None] = (
            [client.save_artifact(a["url"], args.save) for a in made] if args.save else []
        )
    if args.json:
        print_json(made)
        return 0
    for artifact, path in zip(made, saved or [None] * len(made), strict=True):
        where = f"  saved as {path}" if path else ""
        print(f"{artifact['name']}  {artifact['mime']}  {artifact['size']} bytes{where}")
    return 0
