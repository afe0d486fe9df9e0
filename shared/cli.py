"""`taskyard`: run the local stack with a demo task, submit tasks, follow them live."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from shared.client import TaskyardClient
from shared.events import EventKind
from shared.settings import Settings, env_name
from shared.transcript import TranscriptPrinter

if TYPE_CHECKING:
    from services.stack import LocalStack

__all__ = ["main"]

DEMO_TASK = "What is the square root of 2, to 12 decimal places? Use Python."


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    return args.run(args)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="taskyard", description=__doc__)
    parser.add_argument(
        "--gateway", default=os.environ.get("TASKYARD_GATEWAY_URL", "http://127.0.0.1:8000")
    )
    parser.add_argument("--api-key", default=os.environ.get("TASKYARD_API_KEY", "dev-key"))
    sub = parser.add_subparsers(required=True)

    up = sub.add_parser("up", help="start the local stack, run the demo task, stay up")
    up.add_argument("--sandbox", choices=["docker", "local"], default="docker")
    up.add_argument("--gateway-port", type=int, default=8000)
    up.add_argument("--task", default=DEMO_TASK, help="the demo task's text")
    up.set_defaults(run=_up)

    submit = sub.add_parser("submit", help="submit a task and follow it live")
    submit.add_argument("text")
    submit.add_argument("--session", default=None, help="session id (shares memory, interpreter)")
    submit.add_argument("--no-follow", action="store_true", help="print the id and return")
    submit.add_argument(
        "--file", action="append", default=[], type=Path, metavar="LOCAL",
        help="upload this file to the session first and tell the task it is there (repeatable)",
    )  # fmt: skip
    submit.add_argument(
        "--artifacts", type=Path, metavar="DIR",
        help="save what the task's tools make (figures, tables) into DIR as they come",
    )  # fmt: skip
    submit.set_defaults(run=_submit)

    get = sub.add_parser("get", help="print a task's status and result")
    get.add_argument("task_id")
    get.set_defaults(run=_get)

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


def _follow(client: TaskyardClient, task_id: str, artifacts: Path | None = None) -> int:
    status = "unknown"
    show = TranscriptPrinter(sys.stdout)
    saved = 0
    for event in client.events(task_id):
        show(event)
        if artifacts is not None and event.kind == EventKind.ARTIFACT:
            print(f"    saved {client.save_artifact(event.data['url'], artifacts)}", flush=True)
            saved += 1
        if event.is_final:
            status = event.data["status"]
    if artifacts is not None:
        print(f"{saved} artifact(s) saved in {artifacts.resolve()}", flush=True)
    return 0 if status == "succeeded" else 1


def _submit(args: argparse.Namespace) -> int:
    client = TaskyardClient(args.gateway, args.api_key)
    session = args.session or (uuid.uuid4().hex if args.file else None)
    for local in args.file:
        uploaded = client.upload(session, local)
        print(f"uploaded {local} as {uploaded['path']} ({uploaded['size']} bytes)", flush=True)
    names = [local.name for local in args.file]
    accepted = client.submit(args.text, session_id=session, files=names)
    print(f"task {accepted['id']} (session {accepted['session_id']})", flush=True)
    return 0 if args.no_follow else _follow(client, accepted["id"], args.artifacts)


def _upload(args: argparse.Namespace) -> int:
    client = TaskyardClient(args.gateway, args.api_key)
    uploaded = client.upload(args.session, args.local, args.path)
    print(f"{uploaded['path']}: {uploaded['size']} bytes in session {args.session}")
    return 0


def _files(args: argparse.Namespace) -> int:
    for info in TaskyardClient(args.gateway, args.api_key).files(args.session):
        print(f"{info['size']:>12}  {info['path']}")
    return 0


def _download(args: argparse.Namespace) -> int:
    data = TaskyardClient(args.gateway, args.api_key).download(args.session, args.path)
    target = args.output or Path(Path(args.path).name)
    target.write_bytes(data)
    print(f"{args.path}: {len(data)} bytes to {target}")
    return 0


def _get(args: argparse.Namespace) -> int:
    task = TaskyardClient(args.gateway, args.api_key).get(args.task_id)
    print(f"{task['id']}: {task['status']}\nresult: {task['result']}\nerror: {task['error']}")
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM and SIGHUP stop the stack like Ctrl-C does


def _problems(exc: ValidationError) -> str:
    """Each bad setting on a line, named by its environment variable."""
    lines = []
    for error in exc.errors():
        name, msg = env_name(str(error["loc"][0])), error["msg"].removeprefix("Value error, ")
        lines.append(f"  {msg}" if name in msg else f"  {name}: {msg}")
    return "\n".join(lines)


def local_stack(args: argparse.Namespace, settings: Settings) -> LocalStack:
    """The stack `up` starts: its gateway takes the environment's API keys (so a second
    tenant can be tried), and the demo uses the first."""
    from services.stack import LocalStack, StackPorts  # only `up` needs the service code

    return LocalStack(
        ports=StackPorts(gateway=args.gateway_port),
        api_keys=settings.api_keys,
        sandbox_backend=args.sandbox,
        model_tokens_per_s=20,  # slow enough to watch the answer stream in
    )


def _up(args: argparse.Namespace) -> int:
    try:
        settings = Settings()  # checked here, before any service starts with it
    except ValidationError as exc:
        print(f"taskyard up: bad settings:\n{_problems(exc)}", file=sys.stderr)
        return 2
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)

    stack = local_stack(args, settings)
    print(
        f"starting the local stack (logs in {stack.run_dir}); model: scripted upstream", flush=True
    )
    stack.start()
    code = 1
    try:
        keys = ", ".join(f"{key} (tenant {t})" for key, t in settings.tenants_by_key().items())
        print(
            f"gateway: {stack.gateway_url}  (API docs: {stack.gateway_url}/docs)\n"
            f"keys: {keys}\n\n> {args.task}",
            flush=True,
        )
        client = TaskyardClient(stack.gateway_url, stack.api_key)
        code = _follow(client, client.submit(args.task)["id"])
        print(f"\nstack up at {stack.gateway_url}; Ctrl-C to stop", flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("\nstopping", file=sys.stderr)
        return code
    finally:
        stack.stop()


if __name__ == "__main__":
    sys.exit(main())
