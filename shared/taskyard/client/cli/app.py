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
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from importlib.metadata import EntryPoint

from taskyard.client.cli import approvals, files, schedules, sessions, tasks, tenant
from taskyard.client.cli.contributed import add_contributed, installed
from taskyard.client.cli.live import INTERRUPTED
from taskyard.client.cli.support import Subparsers
from taskyard.client.errors import (
    ClientError,
    GatewayUnreachable,
    InvalidRequest,
    NotFound,
    ServerError,
    Unauthorized,
)

__all__ = ["EXIT_CODES", "main", "parser"]

# Exit codes by error, after 1 (a task that did not succeed) and 2 (bad usage, argparse's).
EXIT_CODES: dict[type[ClientError], int] = {
    Unauthorized: 3,
    NotFound: 4,
    InvalidRequest: 5,
    GatewayUnreachable: 6,
    ServerError: 7,
}
# Each group adds its own subcommands, in the order `taskyard --help` lists them.
GROUPS: tuple[Callable[[Subparsers], None], ...] = (
    tasks.register,
    approvals.register,
    sessions.register,
    files.register,
    schedules.register,
    tenant.register,
)


def main(argv: Sequence[str] | None = None, contributed: Iterable[EntryPoint] | None = None) -> int:
    args = parser(contributed).parse_args(argv)
    try:
        run: Callable[[argparse.Namespace], int] = args.run  # each command's set_defaults
        return run(args)
    except ClientError as exc:
        print(f"taskyard: {exc.reason}", file=sys.stderr)
        return EXIT_CODES[type(exc)]
    except KeyboardInterrupt:
        return INTERRUPTED


def parser(contributed: Iterable[EntryPoint] | None = None) -> argparse.ArgumentParser:
    """The parser, with the commands of `contributed` (default: the installed ones) too."""
    top = argparse.ArgumentParser(
        prog="taskyard", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    top.add_argument(
        "--gateway",
        default=os.environ.get("TASKYARD_URL", "http://127.0.0.1:8000"),
        help="the gateway's URL (env TASKYARD_URL; default %(default)s)",
    )
    top.add_argument(
        "--api-key",
        default=os.environ.get("TASKYARD_API_KEY", "dev-key"),
        help="your API key (env TASKYARD_API_KEY; default dev-key, the local stack's)",
    )
    commands = top.add_subparsers(required=True)
    add_contributed(commands, installed() if contributed is None else contributed)
    for register in GROUPS:
        register(commands)
    return top
