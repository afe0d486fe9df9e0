"""`taskyard`: run the local stack with a demo task, submit tasks, follow them live."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

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
    example = '{"tools": [...], "approval": {"tools": "*"}}'
    submit.add_argument("--agent", type=json.loads, default=None,
                        help=f"the agent, as JSON: {example}")  # fmt: skip
    submit.add_argument(
        "--ask", action=argparse.BooleanOptionalAction, default=None,
        help="ask for a decision on each call held for approval (default: when interactive)",
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
    return parser


def _follow(client: TaskyardClient, task_id: str, ask: bool = False) -> int:
    status = "unknown"
    show = TranscriptPrinter(sys.stdout)
    for event in client.events(task_id):
        show(event)
        if ask and event.kind == EventKind.APPROVAL_REQUESTED:
            for call in event.data["calls"]:
                _ask(client, task_id, call)
        if event.is_final:
            status = event.data["status"]
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
    client = TaskyardClient(args.gateway, args.api_key)
    accepted = client.submit(args.text, session_id=args.session, agent=args.agent)
    print(f"task {accepted['id']} (session {accepted['session_id']})", flush=True)
    ask = sys.stdin.isatty() if args.ask is None else args.ask
    return 0 if args.no_follow else _follow(client, accepted["id"], ask)


def _approve(args: argparse.Namespace) -> int:
    client = TaskyardClient(args.gateway, args.api_key)
    print(client.approve(args.task_id, args.call_id, args.arguments)["state"])
    return 0


def _deny(args: argparse.Namespace) -> int:
    client = TaskyardClient(args.gateway, args.api_key)
    print(client.deny(args.task_id, args.call_id, args.reason)["state"])
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
