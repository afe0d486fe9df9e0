"""The worker's side holds, whatever a kernel sends: bounded memory, bounded time, and only
the reply that quotes the call's nonce. The kernels here are real processes that misbehave."""

from __future__ import annotations

import sys
import textwrap
import time
import tracemalloc

import pytest

from shared.sandbox.base import ExecutionResult
from shared.sandbox.errors import KernelProtocolError
from shared.sandbox.kernel import DISPLAY_MAX_OUTPUTS, MAX_LINE_BYTES
from shared.sandbox.local import LocalChannel
from shared.sandbox.session import KernelSandbox

# A "kernel" that says it is ready, reads one request, then does `misbehave` (a statement
# using `request` and `out`, its stdout as bytes).
_KERNEL = """
import json, sys, time
out = sys.stdout.buffer
out.write(b'{"ready": true}\\n'); out.flush()
request = json.loads(sys.stdin.readline())
try:
MISBEHAVE
except BrokenPipeError:
    pass
time.sleep(60)
"""


def _against(misbehave: str) -> KernelSandbox:
    """A session whose kernel does `misbehave` with the first request it gets."""
    argv = [sys.executable, "-c", _KERNEL.replace("MISBEHAVE", textwrap.indent(misbehave, "    "))]
    return KernelSandbox(lambda: LocalChannel.start(argv, {}, launcher="test"), 0.5)


def _run_against(misbehave: str, timeout: float = 20.0) -> tuple[ExecutionResult, float, int]:
    """Run a cell against a kernel that does `misbehave`: the result, the worker's CPU
    seconds and its peak traced memory in bytes."""
    sandbox = _against(misbehave)
    tracemalloc.start()
    cpu = time.process_time()
    try:
        result = sandbox.run("1", timeout)
        return result, time.process_time() - cpu, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        sandbox.close()


def test_an_endless_line_costs_the_worker_little() -> None:
    flood = "chunk = b'x' * (1 << 20)\nfor _ in range(300):\n    out.write(chunk)\nout.flush()"
    result, cpu_s, peak = _run_against(flood)
    assert result.state_lost and f"over {MAX_LINE_BYTES} bytes" in (result.error or "")
    assert peak < 3 * MAX_LINE_BYTES and cpu_s < 2.0


def test_an_oversized_reply_is_refused() -> None:
    forged = (
        "out.write(json.dumps({'id': request['id'], 'nonce': request['nonce'],"
        " 'stdout': 'x' * (20 << 20)}).encode() + b'\\n'); out.flush()"
    )
    result, _, peak = _run_against(forged)
    assert result.state_lost and f"over {MAX_LINE_BYTES} bytes" in (result.error or "")
    assert "x" * 100 not in (result.stdout + (result.error or ""))
    assert peak < 3 * MAX_LINE_BYTES


def test_a_reply_without_the_calls_nonce_is_refused() -> None:
    forged = (
        "out.write(json.dumps({'id': request['id'], 'nonce': 'guessed', 'result': 'FORGED'})"
        ".encode() + b'\\n'); out.flush()"
    )
    result, _, _ = _run_against(forged)
    assert result.state_lost and result.result is None
    assert "does not match" in (result.error or "")


def test_a_trickle_cannot_stretch_the_call_past_its_deadline() -> None:
    trickle = "while True:\n    out.write(b'x'); out.flush(); time.sleep(0.05)"
    started = time.monotonic()
    result, _, _ = _run_against(trickle, timeout=1.0)
    assert time.monotonic() - started < 3.0  # the timeout, the grace, stopping the process
    assert result.timed_out and result.state_lost


def _reply(**fields: object) -> str:
    """A statement answering the request with `fields`, quoting its id and nonce."""
    body = ", ".join(f"{name!r}: {value!r}" for name, value in fields.items())
    return (
        "out.write(json.dumps({'id': request['id'], 'nonce': request['nonce'], " + body + "})"
        ".encode() + b'\\n'); out.flush()"
    )


def test_rich_outputs_past_the_caps_are_refused() -> None:
    output = {"mime": "image/png", "data": "iVBORw0KGgo=", "text": "", "kind": "image"}
    result, _, _ = _run_against(_reply(display=[output] * (DISPLAY_MAX_OUTPUTS + 1)))
    assert result.state_lost and result.display == []
    assert "rich outputs" in (result.error or "")


@pytest.mark.parametrize(
    "forged",
    [
        _reply(file={"path": "elsewhere.txt", "size": 1, "modified": 0.0}),
        _reply(file={"path": "../../etc/passwd", "size": 1, "modified": 0.0}),
        _reply(refused="because", error="a reason of no known kind"),
    ],
    ids=["another path", "a path outside", "an unknown refusal"],
)
def test_a_forged_file_answer_stops_the_kernel(forged: str) -> None:
    sandbox = _against(forged)
    try:
        with pytest.raises(KernelProtocolError):
            sandbox.write_file("in.txt", b"1")
        assert not sandbox.has_kernel
    finally:
        sandbox.close()
