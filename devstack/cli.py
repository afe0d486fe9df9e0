"""`taskyard up`: the local stack with a demo task, for `make up`.

Contributed to the `taskyard` command through the `taskyard.commands` entry point group
(pyproject.toml), so the library's CLI never imports this development package.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time

from pydantic import ValidationError

from devstack.stack import LocalStack, StackPorts
from taskyard.client import TaskyardClient
from taskyard.client.cli import follow
from taskyard.client.cli.contributed import DEV_COMMANDS
from taskyard.plumbing.settings import (
    AgentWorkerSettings,
    GatewaySettings,
    ToolWorkerSettings,
    env_name,
)

__all__ = ["DEMO_TASK", "add_up", "local_stack", "unconfined_note"]

DEMO_TASK = "What is the square root of 2, to 12 decimal places? Use Python."


def add_up(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The `up` subcommand (the entry point `taskyard.commands: up`)."""
    summary = DEV_COMMANDS["up"]
    up = commands.add_parser("up", help=summary, description=summary)
    up.add_argument("--sandbox", choices=["docker", "local"], default="docker")
    up.add_argument("--gateway-port", type=int, default=8000)
    up.add_argument("--task", default=DEMO_TASK, help="the demo task's text")
    up.set_defaults(run=_up)


def local_stack(args: argparse.Namespace, settings: GatewaySettings) -> LocalStack:
    """The stack `up` starts: its gateway takes the environment's API keys (so a second
    tenant can be tried), and the demo uses the first."""
    return LocalStack(
        ports=StackPorts(gateway=args.gateway_port),
        api_keys=settings.api_keys,
        sandbox_backend=args.sandbox,
        model_tokens_per_s=20,  # slow enough to watch the answer stream in
    )


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM and SIGHUP stop the stack like Ctrl-C does


def _up(args: argparse.Namespace) -> int:
    try:
        # Every service's settings are checked here, before any service starts with them.
        settings = GatewaySettings()
        AgentWorkerSettings()
        ToolWorkerSettings()
    except ValidationError as exc:
        print(f"taskyard up: bad settings:\n{_settings_problems(exc)}", file=sys.stderr)
        return 2
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)

    stack = local_stack(args, settings)
    print(
        f"starting the local stack (logs in {stack.run_dir}); model: scripted upstream", flush=True
    )
    if unconfined := unconfined_note(stack):
        print(unconfined, file=sys.stderr, flush=True)
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
        code = follow(client, client.submit(args.task)["id"])
        print(f"\nstack up at {stack.gateway_url}; Ctrl-C to stop", flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("\nstopping", file=sys.stderr)
        return code
    finally:
        stack.stop(drain=True)


def unconfined_note(stack: LocalStack) -> str:
    """What to tell a user whose docker-backed tool workers will not start confined (not root,
    or root without the capabilities), else ""."""
    if stack.sandbox_backend != "docker" or stack.confined("tool_worker"):
        return ""
    return ("note: the tool workers run as this user, not confined (that needs root with "
            "CAP_SYS_ADMIN): they can open the Docker engine's socket if this user can "
            "(docs/security.md)")  # fmt: skip


def _settings_problems(exc: ValidationError) -> str:
    """Each bad setting on a line, named by its environment variable."""
    lines = []
    for error in exc.errors():
        name, msg = env_name(str(error["loc"][0])), error["msg"].removeprefix("Value error, ")
        lines.append(f"  {msg}" if name in msg else f"  {name}: {msg}")
    return "\n".join(lines)
