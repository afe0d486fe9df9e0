"""Following a task live, as `submit` and `follow` (and devstack's `up`) do: its transcript
as it comes, a decision asked for each call held for approval, artifacts saved; Ctrl-C stops
following, not the task."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from taskyard.client import InvalidRequest, TaskyardClient
from taskyard.client.cli.transcript import TranscriptPrinter
from taskyard.runtime.events import EventKind

__all__ = ["INTERRUPTED", "follow", "follow_here"]

INTERRUPTED = 130  # what a shell reports for a command ended by Ctrl-C (128 + SIGINT)


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


def follow_here(
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
