"""`taskyard` commands on what the tenant has: its webhook secret, the system that runs its
tasks."""

from __future__ import annotations

import argparse

from taskyard.client.cli.support import Subparsers, add_command, open_client, print_json

__all__ = ["register"]


def register(commands: Subparsers) -> None:
    """webhook-secret, system."""
    secret = add_command(
        commands, "webhook-secret", "print what your webhook deliveries are signed with"
    )
    secret.set_defaults(run=_webhook_secret)

    system = add_command(commands, "system",
                         "show what runs the tasks: queues, workers, model replicas",
                         json_output=True)  # fmt: skip
    system.set_defaults(run=_system)


def _webhook_secret(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        print(client.webhook_secret())
    return 0


def _system(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        view = client.system()
    if args.json:
        print_json(view)
        return 0
    for queue in view["queues"]:
        print(f"queue {queue['name']}: {queue['depth']} waiting")
    print(f"workers: {', '.join(view['workers']) or 'none answered'}")
    for replica in view["replicas"]:
        health = "healthy" if replica["healthy"] else "unhealthy"
        print(f"replica {replica['name']} ({replica['model']}): {health}, "
              f"{replica['in_flight']} in flight, {replica['latency_ms']:.0f} ms")  # fmt: skip
    return 0
