"""One request to a session's kernel, and its reply: what the reply must quote (the call's id
and a fresh nonce), the interrupt that stops a cell, and the bounded wait for the answer.

A reply that does not quote its call, or carries an over-long text, is the kernel breaking
its protocol (`KernelProtocolError`); the session (`session.KernelSandbox`) then stops it.
"""

from __future__ import annotations

import contextlib
import hmac
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from taskyard.sandbox.channel import KernelChannel
from taskyard.sandbox.errors import KernelGone, KernelProtocolError
from taskyard.sandbox.outputs import check_texts

__all__ = ["KernelCall", "within"]

_POLL_S = 0.1  # a waiting call looks at least this often for a cancel from another thread


@dataclass
class KernelCall:
    """One request in flight: what the reply must quote, and whether it was interrupted."""

    channel: KernelChannel
    id: int
    nonce: str = field(default_factory=lambda: secrets.token_hex(16))
    interrupted_at: float | None = None
    cancelled: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def send(self, message: dict[str, Any], deadline: float) -> None:
        """Send `message` as this call (its id and nonce added) within `deadline`."""
        self.channel.send({"id": self.id, "nonce": self.nonce, **message}, deadline)

    def interrupt(self, cancel: bool, grace: float) -> None:
        """Ask the kernel to stop this call (the ask sent within `grace`); only the first ask
        is sent."""
        with self._lock:
            self.cancelled = self.cancelled or cancel
            if self.interrupted_at is not None:
                return
            self.interrupted_at = time.monotonic()
        with contextlib.suppress(KernelGone):  # the waiting call finds out itself
            self.channel.send({"interrupt": self.id}, self.interrupted_at + grace)

    def check(self, reply: dict[str, Any]) -> dict[str, Any]:
        """`reply`, if it quotes this call; `KernelProtocolError` otherwise."""
        nonce = reply.get("nonce")
        quoted = isinstance(nonce, str) and hmac.compare_digest(nonce, self.nonce)
        if reply.get("id") != self.id or not quoted:
            raise KernelProtocolError(f"a reply that does not match call {self.id}")
        return reply

    def reply_by(self, deadline: float, grace: float) -> dict[str, Any] | None:
        """The cell's reply, interrupting it at `deadline`; None if even that went unanswered
        within `grace`."""
        while True:
            stop = deadline if self.interrupted_at is None else self.interrupted_at + grace
            now = time.monotonic()
            if now >= stop:
                if self.interrupted_at is not None:
                    return None
                self.interrupt(cancel=False, grace=grace)
                continue
            reply = self.channel.receive(min(stop, now + _POLL_S))
            if reply is None:
                continue
            check_texts(self.check(reply))
            return reply


def within(seconds: float, probe: Callable[[], str]) -> str:
    """`probe()`, or "" when it takes longer than `seconds`; it then ends in the background."""
    said: list[str] = []
    thread = threading.Thread(target=lambda: said.append(probe()), daemon=True)
    thread.start()
    thread.join(seconds)
    return said[0] if said else ""
