"""What the `taskyard` commands share: how a command is declared, the client it opens, its
`--json` output, the hint to the next page, ages."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import TypeAlias

from taskyard.client import TaskyardClient

__all__ = ["Subparsers", "add_command", "age", "more", "open_client", "print_json"]

# argparse names no public type for it
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def add_command(
    commands: Subparsers, name: str, summary: str, *, json_output: bool = False
) -> argparse.ArgumentParser:
    """A subcommand whose one-line `summary` is both its line in `taskyard --help` and the
    top of its own `--help`; with `json_output`, a `--json` option (`print_json`)."""
    command = commands.add_parser(name, help=summary, description=summary)
    if json_output:
        command.add_argument(
            "--json", action="store_true", help="print the gateway's answer as JSON instead"
        )
    return command


def open_client(args: argparse.Namespace) -> TaskyardClient:
    return TaskyardClient(args.gateway, args.api_key)


def print_json(data: object) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


def more(command: str, cursor: str | None) -> None:
    """Say (on stderr, so the list stays clean to read) how to get the next page, if any."""
    if cursor is not None:
        print(f"more: taskyard {command} --cursor {shlex.quote(cursor)}", file=sys.stderr)


def age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(max(seconds, 0))}s"
