"""A call ends within its deadline, whatever its kernel does and however loaded the machine:
a dying kernel's call does not wait for the engine to say why or to remove it, and a call
waiting for its session gives up at its deadline."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from taskyard.sandbox import session
from taskyard.sandbox.errors import KernelGone, SandboxBusy
from taskyard.sandbox.provider import KernelSandboxProvider
from taskyard.sandbox.session import EXIT_REASON_S, KernelSandbox
from tests.sandbox.forge import forge_raw

TIMEOUT = 20.0
SLOW_S = 5.0  # how long the fake engines below take to say anything


class SlowKernel:
    """A `KernelChannel` that answers each cell after `answer_s`, or dies when sent one
    (`dies`); either way its engine takes SLOW_S to say why it died or to remove it."""

    def __init__(self, answer_s: float = 0.0, dies: bool = False) -> None:
        self.answer_s = answer_s
        self.dies = dies
        self.closed = threading.Event()
        self._request: dict[str, Any] = {}
        self._sent_at = 0.0

    def send(self, message: dict[str, Any], deadline: float) -> None:
        if "interrupt" not in message:
            self._request, self._sent_at = message, time.monotonic()

    def receive(self, deadline: float) -> dict[str, Any] | None:
        if self.dies:
            raise KernelGone("the kernel's output ended")
        ready_at = self._sent_at + self.answer_s
        time.sleep(max(0.0, min(deadline, ready_at) - time.monotonic()))
        if time.monotonic() < ready_at:
            return None
        return {"id": self._request["id"], "nonce": self._request["nonce"], "stdout": "done"}

    def alive(self) -> bool:
        return True

    def exit_reason(self) -> str:
        time.sleep(SLOW_S)
        return "the process exited with code 70"

    def close(self) -> None:
        time.sleep(SLOW_S)
        self.closed.set()


def _timed(run: Any, *args: Any) -> tuple[Any, float]:
    started = time.monotonic()
    outcome = run(*args)
    return outcome, time.monotonic() - started


def test_a_dying_kernels_call_does_not_wait_on_a_slow_engine() -> None:
    kernel = SlowKernel(dies=True)
    sandbox = KernelSandbox(lambda: kernel, 0.5)
    result, took = _timed(sandbox.run, "1", TIMEOUT)
    assert result.state_lost and "output ended" in (result.error or "")  # no time for why
    assert took < EXIT_REASON_S + 0.5
    assert not kernel.closed.is_set() and kernel.closed.wait(SLOW_S + 5)  # removed meanwhile


def _busy(sandbox: KernelSandbox) -> threading.Thread:
    """A call holding `sandbox` (its cell answers in 3 s), once its cell runs."""
    holder = threading.Thread(target=sandbox.run, args=("hold", TIMEOUT))
    holder.start()
    deadline = time.monotonic() + TIMEOUT
    while not sandbox.cell_running:
        assert time.monotonic() < deadline, "the cell never started"
        time.sleep(0.01)
    return holder


def test_a_call_waiting_for_its_session_gives_up_at_its_deadline() -> None:
    sandbox = KernelSandbox(lambda: SlowKernel(answer_s=3.0), 0.5)
    holder = _busy(sandbox)
    result, took = _timed(sandbox.run, "1", 0.5)
    assert result.timed_out and not result.state_lost and took < 1.0
    assert "this cell did not run" in (result.error or "")
    holder.join()


def test_a_file_request_waiting_for_its_session_gives_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session, "FILE_TIMEOUT_S", 0.3)
    sandbox = KernelSandbox(lambda: SlowKernel(answer_s=3.0), 0.5)
    holder = _busy(sandbox)
    started = time.monotonic()
    with pytest.raises(SandboxBusy):
        sandbox.list_files()
    assert time.monotonic() - started < 1.0
    holder.join()


@pytest.fixture
def cpu_hogs() -> Iterator[None]:
    """A process spinning on each core and one more, beside the test, killed after it."""
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range((os.cpu_count() or 1) + 1)
    ]
    yield
    for hog in hogs:
        hog.kill()
        hog.wait()


def test_a_kernel_killed_by_garbage_ends_its_call_in_time_under_load(
    provider: KernelSandboxProvider, cpu_hogs: None
) -> None:
    sandbox = provider.get("t:garbage-load")
    assert sandbox.run("kept = 1", TIMEOUT).error is None  # started: the clock runs from here
    timeout, grace = 5.0, 1.0  # the fixture's interrupt grace
    garbage = forge_raw("b'\\xff' * 64 + b'garbage' * 1000")
    result, took = _timed(sandbox.run, garbage, timeout)
    assert result.state_lost and "malformed" in (result.error or "")
    assert took < timeout + grace + 1.0
    after = sandbox.run("'kept' in globals()", TIMEOUT)
    assert after.result == "False" and not after.state_lost


def test_a_stuck_kernel_ends_its_call_in_time_under_load(
    provider: KernelSandboxProvider, cpu_hogs: None
) -> None:
    sandbox = provider.get("t:stuck-load")
    assert sandbox.run("import signal\nsignal.signal(2, signal.SIG_IGN)", TIMEOUT).error is None
    result, took = _timed(sandbox.run, "while True: pass", 2.0)
    assert result.timed_out and result.state_lost
    assert took < 2.0 + 1.0 + 1.0  # the timeout, the fixture's interrupt grace, a little
