"""The `taskyard` command: `app.py` parses and runs it; each command group (tasks, approvals,
sessions, files, schedules, tenant) registers its own subcommands; `contributed.py` adds those
other packages contribute (devstack's `up`); `live.py` follows a task as `transcript.py`
prints it."""

from taskyard.client.cli.app import EXIT_CODES, main, parser
from taskyard.client.cli.live import follow

__all__ = ["EXIT_CODES", "follow", "main", "parser"]
