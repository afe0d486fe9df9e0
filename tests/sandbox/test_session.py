"""What a session's sandbox promises, on every backend: state, outputs, timeouts, restarts."""

from __future__ import annotations

import threading

import pytest

from shared.sandbox.errors import SandboxClosed
from shared.sandbox.provider import KernelSandboxProvider

TIMEOUT = 20.0  # generous: the machine is shared; a cell that should finish never nears it


def test_state_survives_between_calls(provider: KernelSandboxProvider) -> None:
    sandbox = provider.get("t:state")
    assert sandbox.run("x = 41", TIMEOUT).error is None
    result = sandbox.run("x + 1", TIMEOUT)
    assert result.result == "42"
    assert not result.state_lost


def test_sessions_do_not_share_state(provider: KernelSandboxProvider) -> None:
    provider.get("t:one").run("secret = 'one'", TIMEOUT)
    result = provider.get("t:two").run("secret", TIMEOUT)
    assert result.error is not None and "NameError" in result.error
    assert provider.get("t:one").run("secret", TIMEOUT).result == "'one'"


def test_outputs_come_back(provider: KernelSandboxProvider) -> None:
    result = provider.get("t:out").run(
        "import sys\nprint('to out')\nprint('to err', file=sys.stderr)\n{'a': 1}", TIMEOUT
    )
    assert (result.stdout, result.stderr, result.result) == ("to out\n", "to err\n", "{'a': 1}")
    assert result.error is None


def test_exception_comes_back_as_traceback(provider: KernelSandboxProvider) -> None:
    result = provider.get("t:exc").run("def f():\n    return 1 / 0\nf()", TIMEOUT)
    assert result.error is not None
    assert "ZeroDivisionError: division by zero" in result.error
    assert "return 1 / 0" in result.error  # the cell's own line is quoted
    assert result.result is None and not result.timed_out


def test_timeout_interrupts_and_keeps_state(provider: KernelSandboxProvider) -> None:
    sandbox = provider.get("t:loop")
    sandbox.run("kept = 'yes'", TIMEOUT)
    result = sandbox.run("while True: pass", 1.0)
    assert result.timed_out and not result.state_lost
    assert result.error is not None and "Timed out" in result.error
    assert sandbox.run("kept", TIMEOUT).result == "'yes'"


def test_stuck_kernel_is_restarted_and_says_state_lost(provider: KernelSandboxProvider) -> None:
    sandbox = provider.get("t:stuck")
    stuck = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass"
    result = sandbox.run(stuck, 1.0)
    assert result.timed_out and result.state_lost
    assert result.error is not None and "state" in result.error and "lost" in result.error
    after = sandbox.run("'signal' in globals(), 2 + 2", TIMEOUT)
    assert after.result == "(False, 4)"
    assert not after.state_lost  # told once, with the timeout


def test_dead_kernel_is_restarted_and_says_state_lost(provider: KernelSandboxProvider) -> None:
    sandbox = provider.get("t:exit")
    sandbox.run("y = 1", TIMEOUT)
    died = sandbox.run("import os\nos._exit(1)", TIMEOUT)
    assert died.state_lost and not died.timed_out
    assert died.error is not None and "code 1" in died.error
    after = sandbox.run("'y' in globals()", TIMEOUT)
    assert after.result == "False" and not after.state_lost


def test_sessions_run_side_by_side(provider: KernelSandboxProvider) -> None:
    keys = [f"t:par{i}" for i in range(3)]
    results: dict[str, str | None] = {}

    def run(key: str) -> None:
        sandbox = provider.get(key)
        sandbox.run(f"me = {key!r}", TIMEOUT)
        results[key] = sandbox.run("me", TIMEOUT).result

    threads = [threading.Thread(target=run, args=(key,)) for key in keys]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {key: repr(key) for key in keys}


def test_released_session_starts_fresh(provider: KernelSandboxProvider) -> None:
    old = provider.get("t:rel")
    old.run("z = 1", TIMEOUT)
    provider.release("t:rel")
    with pytest.raises(SandboxClosed):
        old.run("z", TIMEOUT)
    assert "NameError" in (provider.get("t:rel").run("z", TIMEOUT).error or "")


def test_network_is_unreachable(provider: KernelSandboxProvider) -> None:
    # 192.0.2.0/24 is reserved for documentation: with no route, no packet leaves.
    code = (
        "import socket\n"
        "try:\n"
        "    socket.create_connection(('192.0.2.1', 80), timeout=2)\n"
        "except OSError as e:\n"
        "    print(type(e).__name__, e.errno)\n"
        "[name for _, name in socket.if_nameindex()]"
    )
    result = provider.get("t:net").run(code, TIMEOUT)
    assert result.stdout == "OSError 101\n"  # ENETUNREACH
    assert result.result == "['lo']"


def test_runs_as_nobody(provider: KernelSandboxProvider) -> None:
    result = provider.get("t:uid").run("import os\nos.getuid(), os.getgid()", TIMEOUT)
    assert result.result == "(65534, 65534)"
