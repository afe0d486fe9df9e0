"""Whose a container is, and how a hand-off moves it from one worker to another.

The rule:

1. A container made through the proxy carries the label ``taskyard.caller`` naming the worker
   that made it, set by the proxy from the worker's credential (a create naming another worker
   there is refused). That worker owns it.
2. Its owner may rename it, and only to ``taskyard-handoff-<the first 12 hex of its id>``: it
   is then handed off. Its owner keeps it until a peer takes it over.
3. While it is handed off, any worker may inspect it, and a worker that attaches to it while
   it runs takes it over: the proxy first renames it ``taskyard-taken-<taker>-<id12>``, and
   from then on the taker owns it and the maker no longer does. The proxy takes one container
   over at a time, checking afresh under a lock, so of two takers the second is refused.
4. The taker may hand it off again (rule 2), and so on; handed off again, it reads as its
   maker's (rule 1) until the next take-over.

Ownership lives on the engine, in the label and the name, so it survives a restart of the
proxy. Names change only through the proxy (a create may not name its container), and only
so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["CALLER_LABEL", "HANDOFF_PREFIX", "TAKEN_PREFIX", "Holding", "holding", "taken_name"]

CALLER_LABEL = "taskyard.caller"
# The docker sandbox's own (`taskyard.sandbox.docker.provider`; a test keeps them equal),
# written here so that the proxy imports none of the sandbox's code.
HANDOFF_PREFIX = "taskyard-handoff-"
TAKEN_PREFIX = "taskyard-taken-"
_SHORT = 12


@dataclass(frozen=True)
class Holding:
    """Who owns a container ("" if it was not made through the proxy), and whether it is
    handed off (open to a peer's take-over)."""

    container: str  # its full id
    owner: str
    handed_off: bool

    @property
    def handoff_name(self) -> str:
        """The one name its owner may give it (rule 2)."""
        return f"{HANDOFF_PREFIX}{self.container[:_SHORT]}"


def holding(container: str, name: str, labels: Mapping[str, str] | None) -> Holding:
    """The holding of the container with full id `container`, `name` and `labels` (as the
    engine lists or inspects it)."""
    name = name.lstrip("/")
    short = container[:_SHORT]
    maker = (labels or {}).get(CALLER_LABEL, "")
    if name == f"{HANDOFF_PREFIX}{short}":
        return Holding(container, maker, handed_off=True)
    suffix = f"-{short}"
    if name.startswith(TAKEN_PREFIX) and name.endswith(suffix):
        return Holding(container, name[len(TAKEN_PREFIX) : -len(suffix)], handed_off=False)
    return Holding(container, maker, handed_off=False)


def taken_name(container: str, taker: str) -> str:
    """The name that says `taker` took the container over (rule 3)."""
    return f"{TAKEN_PREFIX}{taker}-{container[:_SHORT]}"
