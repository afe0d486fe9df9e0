"""`taskyard` commands on sessions: list them, show one, fork one, delete one."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from taskyard.client import InvalidRequest
from taskyard.client.cli.support import Subparsers, add_command, age, more, open_client, print_json
from taskyard.client.cli.transcript import TranscriptPrinter
from taskyard.runtime.events import Event, EventKind

__all__ = ["register"]

_VALUE_CHARS = 100  # of a session value's JSON, on its line


def register(commands: Subparsers) -> None:
    """sessions, session, fork-session, delete-session."""
    sessions = add_command(commands, "sessions", "list your sessions, most recently used first",
                           json_output=True)  # fmt: skip
    sessions.add_argument("--limit", type=int, default=20, help="how many (default %(default)s)")
    sessions.add_argument("--cursor", help="the next page, as the last one said")
    sessions.set_defaults(run=_sessions)

    session = add_command(
        commands, "session", "show a session: its messages, tasks and interpreter",
        json_output=True,
    )  # fmt: skip
    session.add_argument("session_id")
    session.add_argument("--offset", type=int, default=0, help="the first message shown")
    session.add_argument("--limit", type=int, default=100, help="messages (default %(default)s)")
    session.add_argument("--memory", default="memory",
                         help="a sub-agent's memory instead (writer.memory)")  # fmt: skip
    session.set_defaults(run=_session)

    fork = add_command(
        commands, "fork-session",
        "fork a session: a new one with its memory and live interpreter",
        json_output=True,
    )  # fmt: skip
    fork.add_argument("session_id", help="the session to fork (no task may run in it)")
    fork.add_argument("--as", dest="new_session_id", metavar="NEW",
                      help="the new session's id (default: one is made)")  # fmt: skip
    fork.set_defaults(run=_fork_session)

    delete = add_command(commands, "delete-session",
                         "forget a session: its memory, interpreter and files")  # fmt: skip
    delete.add_argument("session_id")
    delete.add_argument("--force", action="store_true",
                        help="cancel the task running in it (and those waiting) first")  # fmt: skip
    delete.set_defaults(run=_delete_session)


def _sessions(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        listed = client.list_sessions(args.limit, args.cursor)
    if args.json:
        print_json(listed)
        return 0
    now = time.time()
    for session in listed["sessions"]:
        print(f"{session['id']}  {age(now - session['last_task_at']):>4}  {_standing(session)}")
    more("sessions", listed["next_cursor"])
    return 0


def _standing(session: dict[str, Any]) -> str:
    """Where a listed session stands, in words."""
    parts = [f"{session['task_count']} task(s)", f"{session['total_messages']} message(s)"]
    if session["running"]:
        parts.append(f"running {session['running']}")
    if session["waiting"]:
        parts.append(f"{session['waiting']} waiting")
    if session["interpreter"]:
        parts.append(f"interpreter {_alive(session['interpreter'])}")
    if session.get("forked_from"):
        parts.append(f"forked from {session['forked_from']}")
    return ", ".join(parts)


def _alive(interpreter: dict[str, Any]) -> str:
    return "alive" if interpreter["alive"] else "stopped"


def _session(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        shown = client.session(args.session_id, args.offset, args.limit, args.memory)
    if args.json:
        print_json(shown)
    else:
        _show_session(shown, args.offset, args.memory)
    return 0


def _show_session(session: dict[str, Any], offset: int, memory: str) -> None:
    running = f"running {session['running']}" if session["running"] else "idle"
    print(f"session {session['id']}: {running}, {len(session['waiting'])} waiting")
    if session.get("forked_from"):
        print(f"forked from: {session['forked_from']}")
    interpreter = session["interpreter"]
    used = f", last used {age(time.time() - interpreter['last_used'])} ago" if interpreter else ""
    print(f"interpreter: {_alive(interpreter) + used if interpreter else 'none'}")
    memories = ", ".join(f"{path} ({length})" for path, length in session["memories"].items())
    print(f"memories: {memories or 'none'}")
    for path, value in session["values"].items():
        print(f"value {path}: {json.dumps(value, ensure_ascii=False)[:_VALUE_CHARS]}")
    print(f"tasks, newest first: {' '.join(session['tasks']) or 'none'}")
    messages = session["messages"]
    last = offset + len(messages)
    print(f"messages {offset + 1}-{last} of {session['total_messages']} ({memory}):")
    show = TranscriptPrinter(sys.stdout)
    for message in messages:
        show(Event(id="", kind=EventKind.MESSAGE, data=message))


def _fork_session(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        forked = client.fork_session(args.session_id, args.new_session_id)
    if args.json:
        print_json(forked)
        return 0
    copied = {"copied": "its interpreter copied", "none": "no running interpreter to copy"}
    print(f"session {forked['session_id']} forked from {forked['forked_from']} "
          f"({copied[forked['interpreter']]})")  # fmt: skip
    for name, why in forked.get("skipped", {}).items():
        print(f"  not copied: {name}: {why}")
    return 0


def _delete_session(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        try:
            client.delete_session(args.session_id, args.force)
        except InvalidRequest as exc:
            if exc.status != 409:
                raise
            # The gateway's reason names its query parameter; this command has an option.
            raise InvalidRequest(exc.reason.replace("pass force=true", "add --force"), 409) from exc
    print(f"session {args.session_id} deleted")
    return 0
