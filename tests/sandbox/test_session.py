"""What a session's sandbox promises, on every backend: state, outputs, timeouts, restarts,
limits, and what a cell cannot reach."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from taskyard.sandbox.base import ExecutionResult
from taskyard.sandbox.errors import SandboxClosed
from taskyard.sandbox.provider import KernelSandboxProvider
from tests.sandbox.forge import forge_from_a_child

TIMEOUT = 20.0  # generous: the machine is shared; a cell that should finish never nears it
ProviderFactory = Callable[..., KernelSandboxProvider]

# The CPU clock ticks (1/100 s) other processes of the sandbox use in 0.3 s.
OTHERS_CPU = """
import os, time
def ticks():
    used = {}
    for pid in os.listdir('/proc'):
        if pid.isdigit() and int(pid) not in (1, os.getpid()):
            try:
                fields = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
            except OSError:
                continue
            used[pid] = int(fields[11]) + int(fields[12])
    return used
before = ticks()
time.sleep(0.3)
after = ticks()
sum(after[pid] - before.get(pid, 0) for pid in after)
"""
# Forks sleeping children until the process limit refuses one (its error printed); how many.
FORK_UNTIL_REFUSED = """
import os, time
n = 0
try:
    while n < 100:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
except OSError as e:
    print(e.strerror)
n
"""
# Processes besides the kernel's own two (the supervisor and the executor): from /proc, or where
# a fork server's session has none, by signal 0 over its own pid namespace.
OTHER_PROCESSES = (
    "import os\n"
    "def alive(pid):\n"
    "    try:\n"
    "        os.kill(pid, 0)\n"
    "    except ProcessLookupError:\n"
    "        return False\n"
    "    except PermissionError:\n"
    "        pass\n"
    "    return True\n"
    "seen = [int(p) for p in os.listdir('/proc') if p.isdigit()]\n"
    "seen = seen or [pid for pid in range(1, 4097) if alive(pid)]\n"
    "len(set(seen) - {os.getpid(), os.getppid()})"
)


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
    result = sandbox.run("while True: pass", 0.5)
    assert result.timed_out and not result.state_lost
    assert result.error is not None and "Timed out" in result.error
    assert sandbox.run("kept", TIMEOUT).result == "'yes'"


def test_timeout_stops_every_process_the_cells_started(provider: KernelSandboxProvider) -> None:
    sandbox = provider.get("t:tree")
    forks = "import os\nfor _ in range(3):\n    if os.fork() == 0:\n        while True: pass\n"
    pool = (
        "import multiprocessing\n"
        "def spin(_):\n"
        "    while True: pass\n"
        "pool = multiprocessing.Pool(2)\n"  # never closed: it would respawn killed workers
        "pool.map(spin, range(8))"
    )
    assert sandbox.run(forks + "while True: pass", 0.5).timed_out
    assert sandbox.run(OTHER_PROCESSES, TIMEOUT).result == "0"  # their pids are free again
    assert sandbox.run(pool, 0.5).timed_out
    assert int(sandbox.run(OTHERS_CPU, TIMEOUT).result or "-1") < 3  # nothing spins on


def test_cancel_from_another_thread_keeps_state(provider: KernelSandboxProvider) -> None:
    sandbox = provider.get("t:cancel")
    sandbox.run("kept = 1", TIMEOUT)
    assert not provider.interrupt("t:cancel") and not provider.interrupt("t:nobody")
    result, took = _cancelled(provider, "t:cancel", "while True: pass")
    assert result.cancelled and not result.timed_out and not result.state_lost
    assert result.error is not None and result.error.startswith("Cancelled")
    assert took < 1.5
    assert sandbox.run("kept", TIMEOUT).result == "1"


def test_cancel_of_a_cell_that_ignores_it_restarts_the_kernel(
    provider: KernelSandboxProvider,
) -> None:
    provider.get("t:cancel-stuck").run("import signal\nsignal.signal(2, signal.SIG_IGN)", TIMEOUT)
    result, took = _cancelled(provider, "t:cancel-stuck", "while True: pass")
    assert result.cancelled and result.state_lost
    assert took < 3.0  # the interrupt grace (1 s here), then a fresh kernel next time


def test_cancel_while_the_kernel_starts_runs_nothing(provider: KernelSandboxProvider) -> None:
    sandbox = provider.get("t:cancel-early")
    results: list[ExecutionResult] = []
    worker = threading.Thread(
        target=lambda: results.append(sandbox.run("import time\ntime.sleep(5)\nran = 1", 60))
    )
    worker.start()
    while not provider.interrupt("t:cancel-early"):  # True as soon as `run` is under way
        time.sleep(0.001)
    worker.join(TIMEOUT)
    assert results[0].cancelled and not results[0].state_lost
    assert sandbox.run("'ran' in globals()", TIMEOUT).result == "False"


def _cancelled(
    provider: KernelSandboxProvider, key: str, code: str
) -> tuple[ExecutionResult, float]:
    """Run `code` in a thread, cancel it once it runs; its result and how long cancel took."""
    sandbox = provider.get(key)
    results: list[ExecutionResult] = []
    worker = threading.Thread(target=lambda: results.append(sandbox.run(code, 60)))
    worker.start()
    deadline = time.monotonic() + TIMEOUT
    while not sandbox.cell_running:
        assert time.monotonic() < deadline, "the cell never started"
        time.sleep(0.01)
    cancelled_at = time.monotonic()
    assert provider.interrupt(key)
    worker.join(TIMEOUT)
    return results[0], time.monotonic() - cancelled_at


def test_stuck_kernel_is_restarted_and_says_state_lost(provider: KernelSandboxProvider) -> None:
    sandbox = provider.get("t:stuck")
    stuck = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass"
    result = sandbox.run(stuck, 0.5)
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


def test_reaped_session_says_it_expired(make_provider: ProviderFactory) -> None:
    provider = make_provider(sandbox_idle_s=0.0)
    provider.get("t:idle").run("gone = 1", TIMEOUT)
    assert provider.reap_idle() == ["t:idle"]
    result = provider.get("t:idle").run("gone", TIMEOUT)
    assert result.state_lost and result.state_lost_reason is not None
    assert result.state_lost_reason.startswith("session expired")
    assert "NameError" in (result.error or "")
    assert not provider.get("t:idle").run("1", TIMEOUT).state_lost  # told once


def test_a_kernel_outlives_the_thread_that_started_it(provider: KernelSandboxProvider) -> None:
    sandbox = provider.get("t:thread")
    starter = threading.Thread(target=sandbox.run, args=("kept = 1", TIMEOUT))
    starter.start()
    starter.join()
    time.sleep(0.3)  # a sandbox tied to its starting thread (PR_SET_PDEATHSIG) is gone by now
    result = sandbox.run("kept", TIMEOUT)
    assert result.result == "1" and not result.state_lost


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


@pytest.fixture
def worker_secret() -> Iterator[str]:
    """A secret in the worker's environment, as API keys and Redis URLs are."""
    secret = f"s3cret-{os.urandom(6).hex()}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TASKYARD_TEST_API_KEY", secret)
        yield secret


def test_the_workers_environment_does_not_leak(
    worker_secret: str, provider: KernelSandboxProvider
) -> None:
    code = (
        "import os\n"
        "seen = [repr(dict(os.environ))]\n"
        "for pid in (p for p in os.listdir('/proc') if p.isdigit()):\n"
        "    for name in ('environ', 'cmdline'):\n"
        "        try:\n"
        "            seen.append(open(f'/proc/{pid}/{name}', 'rb').read().decode())\n"
        "        except OSError:\n"
        "            pass\n"
        "'\\n'.join(seen)"
    )
    seen = provider.get("t:env").run(code, TIMEOUT).result or ""
    assert "PATH" in seen and worker_secret not in seen


def test_cells_cannot_reach_the_protocol(provider: KernelSandboxProvider, shape: str) -> None:
    sandbox = provider.get("t:proto")
    forge = (
        "import os\n"
        'line = b\'{"id": 2, "nonce": "guess", "result": "FORGED"}\\n\'\n'
        "for fd in (0, 1, 2):\n"
        "    os.write(fd, line)\n"
        "refused = []\n"
        "for path in ('/proc/1/fd/0', '/proc/1/fd/1', '/proc/1/mem', '/proc/1/environ',\n"
        "             f'/proc/{os.getppid()}/fd/1'):\n"
        "    try:\n"
        "        open(path, 'wb').write(line)\n"
        "    except OSError as e:\n"
        "        refused.append(e.errno)\n"
        "refused"
    )
    # EACCES, each; a fork server's session has no /proc entry at all (an empty tmpfs covers
    # its /proc, as a fresh /proc cannot be mounted there): the paths name nothing, ENOENT.
    refused = 2 if shape == "forks" else 13
    assert sandbox.run(forge, TIMEOUT).result == repr([refused] * 5)
    forged = "{'stdout': '', 'stderr': '', 'result': \"'FORGED'\", 'error': None}"
    sandbox.run(forge_from_a_child(forged, 0.2, "sent"), TIMEOUT)
    assert sandbox.run("import time\ntime.sleep(0.5)\n'real'", TIMEOUT).result == "'real'"
    assert sandbox.run("open('sent').read()", TIMEOUT).result == "'1'"  # it did write


def test_nested_namespaces_and_kernel_interfaces_are_refused(
    provider: KernelSandboxProvider,
) -> None:
    code = (
        "import ctypes, os, subprocess\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "def errno_of(result):\n"
        "    return ctypes.get_errno() if result == -1 else 0\n"
        "unshare = subprocess.run(['unshare', '-Ur', 'id', '-u'], capture_output=True)\n"
        "(unshare.returncode != 0,\n"
        " errno_of(libc.unshare(0x10000000)),\n"  # CLONE_NEWUSER
        " errno_of(libc.ptrace(16, 1, 0, 0)),\n"  # PTRACE_ATTACH to the supervisor
        " errno_of(libc.mount(b'none', b'/tmp', b'tmpfs', 0, None)),\n"
        " errno_of(libc.syscall(250 if os.uname().machine == 'x86_64' else 219, 0, 0)))"  # keyctl
    )
    assert provider.get("t:ns").run(code, TIMEOUT).result == "(True, 1, 1, 1, 1)"  # EPERM


def test_memory_limit_holds_for_the_sandbox_as_a_whole(
    provider: KernelSandboxProvider, shape: str
) -> None:
    sandbox = provider.get("t:mem")  # 128 MB for the sandbox: three children of 80 MB each
    # Held past two of the fork server's memory samples (at most 1 s apart, by design: how
    # long a session may hold more than its share); a container's cgroup acts at once.
    code = (
        "import os, time\n"
        "pids = []\n"
        "for _ in range(3):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        blob = b'x' * (80 << 20)\n"
        "        time.sleep(2.5)\n"
        "        os._exit(0)\n"
        "    pids.append(pid)\n"
        "sum(os.waitpid(pid, 0)[1] == 0 for pid in pids)"
    )
    survivors = sandbox.run(code, TIMEOUT)
    assert survivors.state_lost or int(survivors.result or "3") <= 1
    oom = sandbox.run("blob = b'x' * (512 << 20)", TIMEOUT)
    if shape == "forks":  # each process's address space is bounded too: the allocation fails
        assert "MemoryError" in (oom.error or "") and not oom.state_lost
    else:
        assert oom.state_lost and "out of memory" in (oom.error or "")
    assert sandbox.run("1 + 1", TIMEOUT).result == "2"


def test_process_limit_is_per_sandbox(make_provider: ProviderFactory) -> None:
    provider = make_provider(sandbox_pids=24)
    first = provider.get("t:pids-a").run(FORK_UNTIL_REFUSED, TIMEOUT)
    assert first.stdout == "Resource temporarily unavailable\n"
    # While the first holds its budget:
    second = provider.get("t:pids-b").run(FORK_UNTIL_REFUSED, TIMEOUT)
    assert second.stdout == "Resource temporarily unavailable\n"
    assert 15 <= int(first.result or "0") < 24 and second.result == first.result


def test_cpu_limit_holds(make_provider: ProviderFactory) -> None:
    provider = make_provider(sandbox_cpus=0.1)
    code = (
        "import os, resource, time\n"
        "for _ in range(2):\n"
        "    if os.fork() == 0:\n"
        "        end = time.monotonic() + 0.5\n"
        "        while time.monotonic() < end: pass\n"
        "        os._exit(0)\n"
        "os.wait(), os.wait()\n"
        "used = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "round(used.ru_utime + used.ru_stime, 2)"
    )
    cpu_s = float(provider.get("t:cpu").run(code, TIMEOUT).result or "0")
    assert 0 < cpu_s < 0.3  # 2 processes x 0.5 s of wall time, at most 0.1 CPU between them


@pytest.fixture
def crowded_nobody() -> Iterator[None]:
    """80 processes of uid 65534 on the host, as sandboxes and `nobody` daemons add up."""
    assert os.geteuid() == 0, "needs root (as `make test` runs) to start processes as uid 65534"
    argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "60"]
    sleepers = [subprocess.Popen(argv) for _ in range(80)]
    yield
    for sleeper in sleepers:
        sleeper.kill()
        sleeper.wait()


def test_other_processes_of_the_same_uid_do_not_count(
    crowded_nobody: None, make_provider: ProviderFactory
) -> None:
    provider = make_provider(sandbox_pids=64)
    code = "import subprocess\nsubprocess.run(['true']).returncode"
    assert provider.get("t:crowd").run(code, TIMEOUT).result == "0"
