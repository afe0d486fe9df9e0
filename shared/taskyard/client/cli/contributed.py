"""Subcommands other packages contribute to `taskyard`, found through package entry points.

A distribution declares ``[project.entry-points."taskyard.commands"] NAME = "module:add"``;
`add(commands)` adds subcommand NAME to the parser's subparsers. The development package
contributes `up` this way, so the library never imports it. Where it is not installed (the
production image, a client install: `pip install taskyard`), `taskyard up` says in one line
that it is a development command, and how to run it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable
from functools import partial
from importlib.metadata import EntryPoint, entry_points

from taskyard.client.cli.support import Subparsers

__all__ = ["COMMANDS_GROUP", "DEV_COMMANDS", "add_contributed", "installed"]

COMMANDS_GROUP = "taskyard.commands"
# The development package's commands, by name, with the help `taskyard --help` shows for each;
# each is run by the Makefile's target of the same name, which installs what it needs.
DEV_COMMANDS = {"up": "start the local stack, run the demo task, stay up"}
# Exit code of a development command run without the development package (bad usage).
NOT_INSTALLED = 2

AddCommand = Callable[[Subparsers], None]


def installed() -> Iterable[EntryPoint]:
    """The commands contributed by the installed distributions."""
    return entry_points(group=COMMANDS_GROUP)


def add_contributed(commands: Subparsers, contributed: Iterable[EntryPoint]) -> None:
    """Add each contributed command that loads; each development command that does not comes
    as a stand-in that says how to get it."""
    loaded = {ep.name: add for ep in contributed if (add := _load(ep)) is not None}
    for add in loaded.values():
        add(commands)
    for name, help_text in DEV_COMMANDS.items():
        if name not in loaded:
            _add_missing(commands, name, help_text)


def _load(ep: EntryPoint) -> AddCommand | None:
    """The entry point's `add`, or None where its package is not there: the production image
    carries the entry point in its metadata but not the development package."""
    try:
        add: AddCommand = ep.load()  # the entry point's contract: module:add
        return add
    except ModuleNotFoundError as exc:
        if exc.name != ep.module.partition(".")[0]:
            raise  # the package is there but broken: say so, do not hide it
        return None


def _add_missing(commands: Subparsers, name: str, help_text: str) -> None:
    # No option prefix: every argument (even --help) reaches the stand-in, which says one line.
    stand_in = commands.add_parser(
        name,
        help=f"{help_text} (not installed: development only)",
        add_help=False,
        prefix_chars="\0",
    )
    stand_in.add_argument("ignored", nargs="*")
    stand_in.set_defaults(run=partial(_not_installed, name))


def _not_installed(name: str, args: argparse.Namespace) -> int:
    print(
        f"taskyard: {name} is a development command: run `make {name}` in a taskyard checkout "
        "(it installs the service and dev extras and runs the stack from there)",
        file=sys.stderr,
    )
    return NOT_INSTALLED
