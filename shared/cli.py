"""`taskyard`: submit tasks, list them, follow them live; in a checkout, also run the local
stack with a demo task (`up`, contributed by the development package).

An error is one line on stderr with the gateway's reason, and its own exit code: 1 a task
that did not succeed, 2 bad usage or settings (or a development command without the
development package), 3 the API key, 4 no such task, 5 a request the gateway cannot take,
6 no gateway answering, 7 the gateway failed."""

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
from typing import Any

from pydantic import ValidationError

from shared.cli_commands import add_contributed, installed
from shared.client import (
    ClientError,
    GatewayUnreachable,
    InvalidRequest,
    NotFound,
    ServerError,
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


def main(argv: Sequence[str] | None = None, contributed: Iterable[EntryPoint] | None = None) -> int:
    args = _parser(contributed).parse_args(argv)
    try:
        run: Callable[[argparse.Namespace], int] = args.run  # each command's set_defaults
        return run(args)
    except ClientError as exc:
        print(f"taskyard: {exc.reason}", file=sys.stderr)
        return EXIT_CODES[type(exc)]
    except KeyboardInterrupt:
        return 130


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

    submit = sub.add_parser("submit", help="submit a task and follow it live")
    submit.add_argument("text")
    submit.add_argument("--session", default=None, help="session id (shares memory, interpreter)")
    submit.add_argument("--no-follow", action="store_true", help="print the id and return")
    example = '{"tools": [...], "approval": {"tools": "*"}}'
    submit.add_argument("--agent", type=json.loads, default=None,
                        help=f"the agent, as JSON: {example}")  # fmt: skip
    submit.add_argument(
        "--ask", action=argparse.BooleanOptionalAction, default=None,
        help="ask for a decision on each call held for approval (default: when interactive)",
    )  # fmt: skip
    submit.add_argument(
        "--file", action="append", default=[], type=Path, metavar="LOCAL",
        help="upload this file to the session first and tell the task it is there (repeatable)",
    )  # fmt: skip
    submit.add_argument(
        "--artifacts", type=Path, metavar="DIR",
        help="save what the task's tools make (figures, tables) into DIR as they come",
    )  # fmt: skip
    submit.set_defaults(run=_submit)

    approve = sub.add_parser("approve", help="let a call held for approval run")
    approve.add_argument("task_id")
    approve.add_argument("call_id")
    approve.add_argument("--arguments", type=json.loads, default=None,
                         help="JSON object of arguments to run it with instead")  # fmt: skip
    approve.set_defaults(run=_approve)

    deny = sub.add_parser("deny", help="refuse a call held for approval")
    deny.add_argument("task_id")
    deny.add_argument("call_id")
    deny.add_argument("--reason", default=None, help="what the model reads as the call's result")
    deny.set_defaults(run=_deny)

    get = sub.add_parser("get", help="print a task's status and result")
    get.add_argument("task_id")
    get.set_defaults(run=_get)

    tasks = sub.add_parser("tasks", help="list your recent tasks, newest first")
    tasks.add_argument("--status", default=None, help="only tasks in this status")
    tasks.add_argument("--session", default=None, help="only tasks of this session")
    tasks.add_argument("--limit", type=int, default=20, help="how many (default %(default)s)")
    tasks.set_defaults(run=_tasks)

    follow = sub.add_parser("follow", help="reattach to a task: its transcript so far, then live")
    follow.add_argument("task_id")
    follow.add_argument(
        "--ask", action=argparse.BooleanOptionalAction, default=None,
        help="ask for a decision on each call held for approval (default: when interactive)",
    )  # fmt: skip
    follow.set_defaults(run=_follow_task)

    upload = sub.add_parser("upload", help="put a file into a session's sandbox")
    upload.add_argument("local", type=Path)
    upload.add_argument("--session", required=True)
    upload.add_argument("--as", dest="path", help="its path in the sandbox (default: its name)")
    upload.set_defaults(run=_upload)

    files = sub.add_parser("files", help="list the files in a session's sandbox")
    files.add_argument("--session", required=True)
    files.set_defaults(run=_files)

    download = sub.add_parser("download", help="copy a file out of a session's sandbox")
    download.add_argument("path")
    download.add_argument("--session", required=True)
    download.add_argument("-o", "--output", type=Path, help="where (default: its name, here)")
    download.set_defaults(run=_download)
    return parser


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
    with TaskyardClient(args.gateway, args.api_key) as client:
        session: str | None = args.session
        if args.file:  # the uploads need a session: a new one unless one is named
            session = session or uuid.uuid4().hex
            for local in args.file:
                uploaded = client.upload(session, local)
                print(
                    f"uploaded {local} as {uploaded['path']} ({uploaded['size']} bytes)", flush=True
                )
        names = [local.name for local in args.file]
        accepted = client.submit(args.text, session_id=session, agent=args.agent, files=names)
        print(f"task {accepted['id']} (session {accepted['session_id']})", flush=True)
        ask = sys.stdin.isatty() if args.ask is None else args.ask
        return 0 if args.no_follow else follow(client, accepted["id"], ask, args.artifacts)


def _upload(args: argparse.Namespace) -> int:
    with TaskyardClient(args.gateway, args.api_key) as client:
        uploaded = client.upload(args.session, args.local, args.path)
    print(f"{uploaded['path']}: {uploaded['size']} bytes in session {args.session}")
    return 0


def _files(args: argparse.Namespace) -> int:
    with TaskyardClient(args.gateway, args.api_key) as client:
        for info in client.files(args.session):
            print(f"{info['size']:>12}  {info['path']}")
    return 0


def _download(args: argparse.Namespace) -> int:
    with TaskyardClient(args.gateway, args.api_key) as client:
        data = client.download(args.session, args.path)
    target = args.output or Path(Path(args.path).name)
    target.write_bytes(data)
    print(f"{args.path}: {len(data)} bytes to {target}")
    return 0


def _approve(args: argparse.Namespace) -> int:
    with TaskyardClient(args.gateway, args.api_key) as client:
        print(client.approve(args.task_id, args.call_id, args.arguments)["state"])
    return 0


def _deny(args: argparse.Namespace) -> int:
    with TaskyardClient(args.gateway, args.api_key) as client:
        print(client.deny(args.task_id, args.call_id, args.reason)["state"])
    return 0


def _get(args: argparse.Namespace) -> int:
    with TaskyardClient(args.gateway, args.api_key) as client:
        task = client.get(args.task_id)
    print(f"{task['id']}: {task['status']}\nresult: {task['result']}\nerror: {task['error']}")
    return 0


def _tasks(args: argparse.Namespace) -> int:
    with TaskyardClient(args.gateway, args.api_key) as client:
        listed = client.list_tasks(args.limit, args.status, args.session)
    now = time.time()
    for task in listed["tasks"]:
        text = (task.get("input") or "").partition("\n")[0][:50]
        age = _age(now - task["created_at"])
        print(f"{task['id']}  {task['status']:<16} {age:>4}  {task['session_id'][:20]:<20}  {text}")
    return 0


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(max(seconds, 0))}s"


def _follow_task(args: argparse.Namespace) -> int:
    ask = sys.stdin.isatty() if args.ask is None else args.ask
    with TaskyardClient(args.gateway, args.api_key) as client:
        return follow(client, args.task_id, ask)


def settings_problems(exc: ValidationError) -> str:
    """Each bad setting on a line, named by its environment variable."""
    lines = []
    for error in exc.errors():
        name, msg = env_name(str(error["loc"][0])), error["msg"].removeprefix("Value error, ")
        lines.append(f"  {msg}" if name in msg else f"  {name}: {msg}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
