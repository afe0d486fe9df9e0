"""The worker's side holds, whatever a kernel sends: bounded memory, bounded time, only the
reply that quotes the call's nonce, and nothing past the caps the supervisor applies (were the
supervisor itself subverted). The kernels here are real processes that misbehave, as a local
process and in a container (each channel reads the kernel its own way)."""

from __future__ import annotations

import sys
import textwrap
import time
import tracemalloc
import uuid
from collections.abc import Callable, Iterator

import docker
import pytest

from taskyard.sandbox.base import ExecutionResult
from taskyard.sandbox.channel import KernelChannel, wait_readable
from taskyard.sandbox.docker.channel import DockerChannel
from taskyard.sandbox.docker.provider import OWNER_LABEL
from taskyard.sandbox.docker.spec import ContainerSpec
from taskyard.sandbox.errors import KernelGone, KernelProtocolError
from taskyard.sandbox.kernel import DISPLAY_MAX_OUTPUTS, MAX_LINE_BYTES, MAX_TEXT_CHARS
from taskyard.sandbox.local.provider import LocalChannel
from taskyard.sandbox.session import KernelSandbox

# A "kernel" that says it is ready, reads one request (past the lease lines a docker channel
# sends, which want no reply), then does `misbehave` (a statement using `request` and `out`,
# its stdout as bytes).
_KERNEL = """
import json, sys, time
out = sys.stdout.buffer
out.write(b'{"ready": true}\\n'); out.flush()
request = {"lease": 0}
while "lease" in request:
    request = json.loads(sys.stdin.readline())
try:
MISBEHAVE
except BrokenPipeError:
    pass
time.sleep(60)
"""


Against = Callable[[str], KernelSandbox]


@pytest.fixture(params=["local", "docker"])
def against(request: pytest.FixtureRequest, sandbox_image: str) -> Iterator[Against]:
    """Sessions whose kernel does `misbehave` with the first request it gets; the kernel is
    started at once, so a test's clock runs from the call."""
    sandboxes: list[KernelSandbox] = []
    client = request.getfixturevalue("docker_client") if request.param == "docker" else None

    def make(misbehave: str) -> KernelSandbox:
        argv = ["python3", "-c", _KERNEL.replace("MISBEHAVE", textwrap.indent(misbehave, "    "))]
        channel: KernelChannel
        if client is None:
            channel = LocalChannel.start([sys.executable, *argv[1:]], {}, launcher="test")
        else:
            spec = ContainerSpec(sandbox_image, command=tuple(argv))
            channel = DockerChannel.start(client.api, spec, {OWNER_LABEL: uuid.uuid4().hex})
        sandboxes.append(KernelSandbox(lambda: channel, 0.5))
        return sandboxes[-1]

    yield make
    for sandbox in sandboxes:
        sandbox.close()


def _run_against(
    against: Against, misbehave: str, timeout: float = 20.0
) -> tuple[ExecutionResult, float, int]:
    """Run a cell against a kernel that does `misbehave`: the result, the worker's CPU
    seconds and its peak traced memory in bytes."""
    sandbox = against(misbehave)
    tracemalloc.start()
    cpu = time.process_time()
    try:
        result = sandbox.run("1", timeout)
        return result, time.process_time() - cpu, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_an_endless_line_costs_the_worker_little(against: Against) -> None:
    flood = "chunk = b'x' * (1 << 20)\nfor _ in range(300):\n    out.write(chunk)\nout.flush()"
    result, cpu_s, peak = _run_against(against, flood)
    assert result.state_lost and f"over {MAX_LINE_BYTES} bytes" in (result.error or "")
    assert peak < 3 * MAX_LINE_BYTES and cpu_s < 2.0


def test_an_oversized_reply_is_refused(against: Against) -> None:
    forged = (
        "out.write(json.dumps({'id': request['id'], 'nonce': request['nonce'],"
        " 'stdout': 'x' * (20 << 20)}).encode() + b'\\n'); out.flush()"
    )
    result, _, peak = _run_against(against, forged)
    assert result.state_lost and f"over {MAX_LINE_BYTES} bytes" in (result.error or "")
    assert "x" * 100 not in (result.stdout + (result.error or ""))
    assert peak < 3 * MAX_LINE_BYTES


def test_a_reply_without_the_calls_nonce_is_refused(against: Against) -> None:
    forged = (
        "out.write(json.dumps({'id': request['id'], 'nonce': 'guessed', 'result': 'FORGED'})"
        ".encode() + b'\\n'); out.flush()"
    )
    result, _, _ = _run_against(against, forged)
    assert result.state_lost and result.result is None
    assert "does not match" in (result.error or "")


def test_a_trickle_cannot_stretch_the_call_past_its_deadline(against: Against) -> None:
    trickle = "while True:\n    out.write(b'x'); out.flush(); time.sleep(0.05)"
    sandbox = against(trickle)
    started = time.monotonic()
    result = sandbox.run("1", 1.0)
    assert time.monotonic() - started < 2.5  # the timeout, the grace, and a little
    assert result.timed_out and result.state_lost


def test_a_kernel_that_stops_reading_cannot_hold_a_call(against: Against) -> None:
    sandbox = against(_reply(result="'first'"))  # then it reads nothing more
    assert sandbox.run("1", 20.0).result == "'first'"
    started = time.monotonic()
    result = sandbox.run(f"x = '{'x' * (8 << 20)}'", 1.0)  # more than any buffer on the way
    assert time.monotonic() - started < 2.0
    assert result.state_lost and "took no request" in (result.error or "")


def _reply(**fields: object) -> str:
    """A statement answering the request with `fields`, quoting its id and nonce."""
    return _reply_of(**{name: repr(value) for name, value in fields.items()})


def _reply_of(**expressions: str) -> str:
    """As `_reply`, each field's value a Python expression."""
    body = ", ".join(f"{name!r}: {value}" for name, value in expressions.items())
    return (
        "out.write(json.dumps({'id': request['id'], 'nonce': request['nonce'], " + body + "})"
        ".encode() + b'\\n'); out.flush()"
    )


def test_rich_outputs_past_the_caps_are_refused(against: Against) -> None:
    output = {"mime": "image/png", "data": "iVBORw0KGgo=", "text": "", "kind": "image"}
    result, _, _ = _run_against(against, _reply(display=[output] * (DISPLAY_MAX_OUTPUTS + 1)))
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
def test_a_forged_file_answer_stops_the_kernel(against: Against, forged: str) -> None:
    sandbox = against(forged)
    with pytest.raises(KernelProtocolError):
        sandbox.write_file("in.txt", b"1")
    assert not sandbox.has_kernel


@pytest.mark.parametrize(
    ("forged", "why"),
    [
        (_reply_of(stdout=f"'x' * {MAX_TEXT_CHARS + 1}"), f"over {MAX_TEXT_CHARS} characters"),
        (_reply(result=["not", "text"]), "result is not text"),
        (_reply(interrupted="yes"), "interrupted is not true or false"),
        (
            "out.write(b'{\"id\": 1, \"stdout\": ' + b'[' * 100_000 + b'\\n'); out.flush()",
            "malformed line",
        ),
    ],
    ids=["text size", "text type", "interrupted", "depth"],
)
def test_a_reply_past_the_supervisors_caps_is_refused(
    against: Against, forged: str, why: str
) -> None:
    result, _, _ = _run_against(against, forged)
    assert result.state_lost and result.result is None and why in (result.error or "")


def test_a_closed_docker_channel_is_gone_not_a_crash(
    sandbox_image: str, docker_client: docker.DockerClient
) -> None:
    """A channel closed under a reader (a hand-off, a reap, the pool's close) reads as a kernel
    gone: not alive, KernelGone on read, a lease renewal skipped; never the socket's -1 passed
    to poll (ValueError)."""
    client = docker_client
    spec = ContainerSpec(
        sandbox_image, command=("python3", "-c", _KERNEL.replace("MISBEHAVE", "    pass"))
    )
    channel = DockerChannel.start(client.api, spec, {OWNER_LABEL: uuid.uuid4().hex})
    try:
        assert channel.alive()
        channel.close()
        assert not channel.alive()
        channel.renew(10.0)  # no-op once closed
        with pytest.raises(KernelGone):
            channel.receive(time.monotonic() + 1)
        with pytest.raises(KernelGone):
            wait_readable(-1, time.monotonic() + 1)
    finally:
        channel.close()
