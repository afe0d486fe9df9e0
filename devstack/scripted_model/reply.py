"""What the scripted model's app answers: a whole body, or server-sent events, with pacing."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Reply"]


@dataclass(slots=True)
class Reply:
    """A response: a whole body, or (when `body` is a list) server-sent events sent chunked."""

    status: int
    body: bytes | list[bytes]
    content_type: bytes = b"application/json"
    headers: tuple[tuple[bytes, bytes], ...] = ()
    delay_s: float = 0.0  # before the first byte
    interval_s: float = 0.0  # between stream events
    abort_after: int | None = None  # close the connection after this many stream events
    hold_until: int | None = None  # wait at the app's gate for a batch this big first
