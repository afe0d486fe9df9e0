"""`taskyard`: submit tasks, follow them live, list, cancel and decide on them; list, show
and delete sessions, move files in and out of their sandboxes; schedule tasks on a cron
(`schedules`); in a checkout, also run the local stack with a demo task (`up`, contributed by
the development package).

An error is one line on stderr with the gateway's reason, and its own exit code: 1 a task
that did not succeed, 2 bad usage or settings (or a development command without the
development package), 3 the API key, 4 no such task, session or schedule (or call, file,
artifact), 5 a request the gateway cannot take (as it is, or in the current state), 6 no
gateway answering, 7 the gateway failed, 130 interrupted (Ctrl-C: a task followed goes on)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any, get_args

from pydantic import ValidationError

from shared.cli_commands import add_contributed, installed
from shared.cli_schedules import add_schedule_commands
from shared.cli_sessions import add_session_commands
from shared.cli_support import Subparsers, add_command, age, more, open_client, print_json
from shared.client import (
    ClientError,
    GatewayUnreachable,
    InvalidRequest,
    NotFound,
    ServerError,
    SessionBusy,
    TaskyardClient,
    Unauthorized,
)
from shared.events import EventKind
from shared.settings import env_name
from shared.transcript import TranscriptPrinter

__all__ = ["follow", "main", "settings_problems"]

# Exit codes by error, after 1 (a task that did not succeed) and 2 (bad usage, argparse's).
EXIT_CODES: dict[type[ClientError], int] = {
    Unauthorized: 3,
    NotFound: 4,
    InvalidRequest: 5,
    GatewayUnreachable: 6,
    ServerError: 7,
}
INTERRUPTED = 130  # what a shell reports for a command ended by Ctrl-C (128 + SIGINT)


def main(argv: Sequence[str] | None = None, contributed: Iterable[EntryPoint] | None = None) -> int:
    args = _parser(contributed).parse_args(argv)
    try:
        run: Callable[[argparse.Namespace], int] = args.run  # each command's set_defaults
        return run(args)
    except ClientError as exc:
        print(f"taskyard: {exc.reason}", file=sys.stderr)
        return EXIT_CODES[type(exc)]
    except KeyboardInterrupt:
        return INTERRUPTED


def _parser(contributed: Iterable[EntryPoint] | None = None) -> argparse.ArgumentParser:
    """The parser, with the commands of `contributed` (default: the installed ones) too."""
    parser = argparse.ArgumentParser(
        prog="taskyard",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--gateway",
        default=os.environ.get("TASKYARD_URL", "http://127.0.0.1:8000"),
        help="the gateway's URL (env TASKYARD_URL; default %(default)s)",
    )
    parser.add_argument(
        "--api-key",
        default=os.environ.get("TASKYARD_API_KEY", "dev-key"),
        help="your API key (env TASKYARD_API_KEY; default dev-key, the local stack's)",
    )
    sub = parser.add_subparsers(required=True)
    add_contributed(sub, installed() if contributed is None else contributed)
    _add_task_commands(sub)
    _add_approval_commands(sub)
    add_session_commands(sub)
    add_schedule_commands(sub)
    _add_tenant_commands(sub)
    return parser


def _add_task_commands(sub: Subparsers) -> None:
    submit = add_command(sub, "submit", "submit a task and follow it live")
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
        "--cancel-on-interrupt", action="store_true",
        help="Ctrl-C cancels the task (by default it goes on without you)",
    )  # fmt: skip
    submit.set_defaults(run=_submit)

    follow_ = add_command(sub, "follow", "reattach to a task: its transcript so far, then live")
    follow_.add_argument("task_id")
    _add_ask(follow_)
    follow_.set_defaults(run=_follow_task)

    get = add_command(sub, "get", "print a task's status and result", json_output=True)
    get.add_argument("task_id")
    get.set_defaults(run=_get)

    tasks = add_command(sub, "tasks", "list your recent tasks, newest first", json_output=True)
    tasks.add_argument("--status", default=None, help="only tasks in this status")
    tasks.add_argument("--session", default=None, help="only tasks of this session")
    tasks.add_argument("--limit", type=int, default=20, help="how many (default %(default)s)")
    tasks.add_argument("--cursor", help="the next page, as the last one said")
    tasks.set_defaults(run=_tasks)

    cancel = add_command(sub, "cancel", "end a task now (its session passes to the next one)")
    cancel.add_argument("task_id")
    cancel.set_defaults(run=_cancel)

    artifacts = add_command(sub, "artifacts", "list what a task's tools made; --save to download",
                            json_output=True)  # fmt: skip
    artifacts.add_argument("task_id")
    artifacts.add_argument("--save", type=Path, metavar="DIR", help="download them into DIR")
    artifacts.set_defaults(run=_artifacts)


def _add_ask(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--ask", action=argparse.BooleanOptionalAction, default=None,
        help="ask for a decision on each call held for approval (default: when interactive)",
    )  # fmt: skip


def _add_approval_commands(sub: Subparsers) -> None:
    approve = add_command(sub, "approve", "let a call held for approval run")
    approve.add_argument("task_id")
    approve.add_argument("call_id")
    approve.add_argument("--arguments", type=json.loads, default=None,
                         help="JSON object of arguments to run it with instead")  # fmt: skip
    approve.set_defaults(run=_approve)

    deny = add_command(sub, "deny", "refuse a call held for approval")
    deny.add_argument("task_id")
    deny.add_argument("call_id")
    deny.add_argument("--reason", default=None, help="what the model reads as the call's result")
    deny.set_defaults(run=_deny)


def _add_tenant_commands(sub: Subparsers) -> None:
    secret = add_command(
        sub, "webhook-secret", "print what your webhook deliveries are signed with"
    )
    secret.set_defaults(run=_webhook_secret)

    system = add_command(sub, "system", "show what runs the tasks: queues, workers, model replicas",
                         json_output=True)  # fmt: skip
    system.set_defaults(run=_system)


def follow(
    client: TaskyardClient, task_id: str, ask: bool = False, artifacts: Path | None = None
) -> int:
    """Print a task's transcript live until it ends; 0 if it succeeded, else 1."""
    status = "unknown"
    show = TranscriptPrinter(sys.stdout)
    saved = 0
    for event in client.events(task_id):
        show(event)
        if ask and event.kind == EventKind.APPROVAL_REQUESTED:
            for call in event.data["calls"]:
                _ask(client, task_id, call)
        if artifacts is not None and event.kind == EventKind.ARTIFACT:
            print(f"    saved {client.save_artifact(event.data['url'], artifacts)}", flush=True)
            saved += 1
        if event.is_final:
            status = event.data["status"]
    if artifacts is not None:
        print(f"{saved} artifact(s) saved in {artifacts.resolve()}", flush=True)
    return 0 if status == "succeeded" else 1


def _ask(client: TaskyardClient, task_id: str, call: dict[str, Any]) -> None:
    """Show a held call and take the person's decision: y, N (with a reason) or e(dit)."""
    print(f"    {json.dumps(call['arguments'], ensure_ascii=False)}")
    answer = input(f"run {call['tool']} call {call['id']}? [y/N/e(dit)] ").strip().lower()
    if answer in {"y", "yes"}:
        client.approve(task_id, call["id"])
    elif answer in {"e", "edit"}:
        edited = json.loads(input("arguments (a JSON object): "))
        client.approve(task_id, call["id"], edited)
    else:
        client.deny(task_id, call["id"], input("reason (for the model): ").strip() or None)


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
        )  # fmt: skip
        print(f"task {accepted['id']} (session {accepted['session_id']})", flush=True)
        if args.no_follow:
            return 0
        ask = sys.stdin.isatty() if args.ask is None else args.ask
        return _follow_here(
            client, accepted["id"], ask, args.artifacts, cancel=args.cancel_on_interrupt
        )


def _follow_task(args: argparse.Namespace) -> int:
    ask = sys.stdin.isatty() if args.ask is None else args.ask
    with open_client(args) as client:
        return _follow_here(client, args.task_id, ask)


def _follow_here(
    client: TaskyardClient,
    task_id: str,
    ask: bool,
    artifacts: Path | None = None,
    cancel: bool = False,
) -> int:
    """`follow`, where Ctrl-C stops following and says what became of the task: it goes on
    (the server runs it whether or not anyone watches) or, with `cancel`, it is cancelled."""
    try:
        return follow(client, task_id, ask, artifacts)
    except KeyboardInterrupt:
        said = _cancelled(client, task_id) if cancel else _goes_on(task_id)
        # A terminal has echoed ^C where the transcript stood, perhaps mid-line.
        start = "\n" if sys.stderr.isatty() else ""
        print(f"{start}taskyard: stopped following; {said}", file=sys.stderr, flush=True)
        return INTERRUPTED


def _goes_on(task_id: str) -> str:
    return (
        f"task {task_id} goes on running on the server: `taskyard follow {task_id}` to "
        f"reattach, `taskyard cancel {task_id}` to cancel it"
    )


def _cancelled(client: TaskyardClient, task_id: str) -> str:
    try:
        client.cancel(task_id)
    except InvalidRequest as exc:  # it ended meanwhile
        return f"task {task_id} not cancelled: {exc.reason}"
    return f"task {task_id} cancelled"


def _approve(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        print(client.approve(args.task_id, args.call_id, args.arguments)["state"])
    return 0


def _deny(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        print(client.deny(args.task_id, args.call_id, args.reason)["state"])
    return 0


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


def _webhook_secret(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        print(client.webhook_secret())
    return 0


def _system(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        view = client.system()
    if args.json:
        print_json(view)
        return 0
    for queue in view["queues"]:
        print(f"queue {queue['name']}: {queue['depth']} waiting")
    print(f"workers: {', '.join(view['workers']) or 'none answered'}")
    for replica in view["replicas"]:
        health = "healthy" if replica["healthy"] else "unhealthy"
        print(f"replica {replica['name']} ({replica['model']}): {health}, "
              f"{replica['in_flight']} in flight, {replica['latency_ms']:.0f} ms")  # fmt: skip
    return 0


def settings_problems(exc: ValidationError) -> str:
    """Each bad setting on a line, named by its environment variable."""
    lines = []
    for error in exc.errors():
        name, msg = env_name(str(error["loc"][0])), error["msg"].removeprefix("Value error, ")
        lines.append(f"  {msg}" if name in msg else f"  {name}: {msg}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
