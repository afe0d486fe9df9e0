"""Waiting in a test for what threads and processes reach in their own time: poll, and fail
the test (not hang it) naming what never came."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(
    condition: Callable[[], bool],
    what: str = "the condition",
    timeout: float = 10.0,
    every: float = 0.01,
) -> None:
    """Poll `condition` every `every` seconds until it is true; fail the test after `timeout`."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what} after {timeout} s"
        time.sleep(every)
