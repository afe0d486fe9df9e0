"""`taskyard approve` and `taskyard deny`: decide on a call held for approval."""

from __future__ import annotations

import argparse
import json

from taskyard.client.cli.support import Subparsers, add_command, open_client

__all__ = ["register"]


def register(commands: Subparsers) -> None:
    """approve, deny."""
    approve = add_command(commands, "approve", "let a call held for approval run")
    approve.add_argument("task_id")
    approve.add_argument("call_id")
    approve.add_argument("--arguments", type=json.loads, default=None,
                         help="JSON object of arguments to run it with instead")  # fmt: skip
    approve.set_defaults(run=_approve)

    deny = add_command(commands, "deny", "refuse a call held for approval")
    deny.add_argument("task_id")
    deny.add_argument("call_id")
    deny.add_argument("--reason", default=None, help="what the model reads as the call's result")
    deny.set_defaults(run=_deny)


def _approve(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        print(client.approve(args.task_id, args.call_id, args.arguments)["state"])
    return 0


def _deny(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        print(client.deny(args.task_id, args.call_id, args.reason)["state"])
    return 0
