"""Ids that must be unique but need not be secret: a job's Celery task id and delivery tag, a
take of a job. They come from a generator of the process's own, not from the OS.

Why not `uuid.uuid4()`: it reads `os.urandom`, whose system call releases the GIL. A worker
whose other thread is busy (the agent worker's hub and loop thread, the tool worker's consumer
and pool threads) then hands that thread the GIL, and waits to get it back: two context
switches and a wait per id, three ids a job. What must not be guessed (a kernel call's nonce,
a task's id, a webhook secret) still comes from `os.urandom` or `secrets`.

The generator is seeded from `os.urandom`, again in a forked child (two processes never draw the
same ids), and is no one else's: code that seeds `random` does not touch it.
"""

from __future__ import annotations

import os
import random
import uuid

__all__ = ["unique_hex", "unique_uuid"]

_generator = random.Random()  # seeded from os.urandom
os.register_at_fork(after_in_child=_generator.seed)


def unique_uuid() -> str:
    """A random (version 4) UUID's text, as `str(uuid.uuid4())` gives, without a system call."""
    return str(uuid.UUID(int=_generator.getrandbits(128), version=4))


def unique_hex(chars: int) -> str:
    """`chars` random hex digits, without a system call."""
    return f"{_generator.getrandbits(4 * chars):0{chars}x}"
