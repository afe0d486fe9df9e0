"""The fork-server backend on the real engine: many sessions of one tenant per container, each
a fork of a pre-imported interpreter walled off from its neighbours (kernel/isolation.py).

The attacks here are a session's against another session of the same container, and against
the container's fork server and supervisor; what a session can do to the host is the one-
container tests' (test_docker.py, test_forged_frames.py), which run on this backend too."""

from __future__ import annotations

import json
from collections.abc import Iterator

import docker
import pytest

from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.sandbox.docker.provider import OWNER_LABEL, DockerSandboxProvider
from taskyard.sandbox.session import KernelSandbox
from tests.sandbox.conftest import FORKS, ProviderFactory

pytestmark = pytest.mark.docker
TIMEOUT = 30.0


@pytest.fixture
def fork_provider(
    make_docker_provider: ProviderFactory, settings: ToolWorkerSettings
) -> DockerSandboxProvider:
    provider = make_docker_provider(settings=settings.model_copy(update=FORKS), pool_size=0)
    assert isinstance(provider, DockerSandboxProvider)
    return provider


@pytest.fixture
def pair(fork_provider: DockerSandboxProvider) -> Iterator[tuple[KernelSandbox, KernelSandbox]]:
    """Two sessions of one tenant: one container, two walled-off forks."""
    first, second = fork_provider.get("acme:first"), fork_provider.get("acme:second")
    for session in (first, second):
        assert session.run("7 * 6", TIMEOUT).result == "42"
    yield first, second


def _containers(client: docker.DockerClient, provider: DockerSandboxProvider) -> list[str]:
    found = client.api.containers(filters={"label": f"{OWNER_LABEL}={provider.owner}"})
    return [c["Id"] for c in found]


# A cell's start: fork children that sleep until the session's process share runs out (its
# `except` and what it prints follow).
_FORK_ALL = (
    "import os, time\n"
    "kids = 0\n"
    "try:\n"
    "    while kids < 1000:\n"
    "        if os.fork() == 0:\n"
    "            time.sleep(60); os._exit(0)\n"
    "        kids += 1\n"
)


def _out(session: KernelSandbox, code: str) -> str:
    result = session.run(code, TIMEOUT)
    assert result.error is None, result.error
    return result.stdout


def test_a_tenants_sessions_share_a_container_and_two_tenants_never_do(
    fork_provider: DockerSandboxProvider, docker_client: docker.DockerClient
) -> None:
    keys = ("acme:1", "acme:2", "acme:3", "zeta:1")
    # Each session's host name is its container's (a UTS namespace starts as a copy of it);
    # a host started ahead for a tenant holds none of these.
    hosts = {key: _out(fork_provider.get(key), "import socket\nprint(socket.gethostname())")
             for key in keys}  # fmt: skip
    assert hosts["acme:1"] == hosts["acme:2"] == hosts["acme:3"] != hosts["zeta:1"]
    running = {c[:12] for c in _containers(docker_client, fork_provider)}
    assert {name.strip() for name in hosts.values()} <= running


def test_a_session_sees_no_file_of_another(pair: tuple[KernelSandbox, KernelSandbox]) -> None:
    first, second = pair
    _out(first, "for d in ('/work', '/tmp', '/dev/shm'): open(d + '/secret', 'w').write('s')")
    seen = _out(second, "import os; print([os.listdir(d) for d in ('/work', '/dev/shm')])")
    assert seen.strip() == "[[], []]"
    assert "secret" not in _out(second, "import os; print(os.listdir('/tmp'))")
    assert _out(second, "import os; print(os.listdir('/proc'))").strip() == "[]"


def test_a_session_sees_and_signals_no_process_but_its_own(
    pair: tuple[KernelSandbox, KernelSandbox],
) -> None:
    first, second = pair
    _out(first, "import subprocess; kept = subprocess.Popen(['sleep', '600']); x = 'kept'")
    found = _out(
        second,
        "import os, signal\n"
        "seen = []\n"
        "for pid in range(1, 4097):\n"
        "    try:\n"
        "        os.kill(pid, signal.SIGKILL if pid != 1 else 0)\n"
        "        seen.append(pid)\n"
        "    except OSError:\n"
        "        pass\n"
        "print(seen, os.getpid())",
    )
    assert found.strip() == "[1] 1"  # itself, the init of its own pid namespace
    assert _out(first, "print(x, kept.poll())").strip() == "kept None"


def test_a_session_reaches_no_socket_of_another(
    pair: tuple[KernelSandbox, KernelSandbox],
) -> None:
    first, second = pair
    _out(first, "import socket; s = socket.socket(); s.bind(('127.0.0.1', 8000)); s.listen()")
    _out(first, "u = socket.socket(socket.AF_UNIX); u.bind('\\0taskyard-test'); u.listen()")
    reached = _out(
        second,
        "import socket\n"
        "t = socket.socket(); print(t.connect_ex(('127.0.0.1', 8000)) != 0)\n"
        "u = socket.socket(socket.AF_UNIX); print(u.connect_ex('\\0taskyard-test') != 0)",
    )
    assert reached.split() == ["True", "True"]


def test_namespaces_mounts_and_tracing_are_refused_to_the_cells(
    pair: tuple[KernelSandbox, KernelSandbox],
) -> None:
    _, second = pair
    refused = _out(
        second,
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "calls = [libc.unshare(0x10000000), libc.mount(b'tmpfs', b'/work', b'tmpfs', 0, None),\n"
        "         libc.ptrace(16, 1, 0, 0), libc.setns(0, 0)]\n"
        "print(calls)",
    )
    assert refused.strip() == "[-1, -1, -1, -1]"


def test_each_session_has_its_own_memory_share(
    pair: tuple[KernelSandbox, KernelSandbox],
) -> None:
    first, second = pair
    over = first.run("x = bytearray(300 << 20)", TIMEOUT)  # the share is 128m
    assert over.error is not None and ("MemoryError" in over.error or over.state_lost)
    assert _out(second, "y = bytearray(64 << 20); print(len(y) >> 20)").strip() == "64"


@pytest.fixture
def roomy_pair(
    make_docker_provider: ProviderFactory, settings: ToolWorkerSettings
) -> tuple[KernelSandbox, KernelSandbox]:
    """Two sessions of one container, each with a 256m memory share."""
    roomy = settings.model_copy(update={**FORKS, "sandbox_memory": "256m"})
    provider = make_docker_provider(settings=roomy, pool_size=0)
    first, second = provider.get("acme:big"), provider.get("acme:small")
    for session in (first, second):
        assert session.run("7 * 6", TIMEOUT).result == "42"
    return first, second


def test_a_sessions_memory_counts_all_its_processes(
    roomy_pair: tuple[KernelSandbox, KernelSandbox],
) -> None:
    first, second = roomy_pair
    _out(second, "kept = bytearray(64 << 20)")
    # Four children of 100 MB each: within each one's address space, over the session's share.
    hoard = first.run(
        "import os, time\n"
        "for _ in range(4):\n"
        "    if os.fork() == 0:\n"
        "        blob = bytearray(100 << 20)\n"
        "        time.sleep(60)\n"
        "        os._exit(0)\n"
        "time.sleep(60)",
        TIMEOUT,
    )
    assert hoard.state_lost and "out of memory" in (hoard.error or ""), hoard.error
    assert "share of 256 MiB" in (hoard.error or "")
    assert _out(second, "print(len(kept) >> 20)") == "64\n"
    assert first.run("1 + 1", TIMEOUT).result == "2"  # a fresh session in its place


def test_a_pools_shared_pages_count_once(roomy_pair: tuple[KernelSandbox, KernelSandbox]) -> None:
    first, _ = roomy_pair
    # 120 MB the pool's four workers share with the executor copy-on-write: counted in each
    # one's resident size (600 MB), once in their proportional sizes.
    pooled = _out(
        first,
        "import multiprocessing, time\n"
        "data = bytearray(120 << 20)\n"
        "pool = multiprocessing.Pool(4)\n"
        "print(sum(pool.map(len, [b'x'] * 8)))\n"
        "time.sleep(1.5)\n"  # a memory sample or more
        "pool.terminate()",
    )
    assert pooled == "8\n"
    assert first.run("len(data) >> 20", TIMEOUT).result == "120"


def test_an_interrupt_gives_the_process_share_back(
    pair: tuple[KernelSandbox, KernelSandbox],
) -> None:
    first, second = pair
    fork_all = _FORK_ALL + "except OSError:\n    pass\nprint(kids)\n"
    # Killed by the interrupt, its children would stay zombies of the executor if not reaped.
    assert first.run(fork_all + "while True: pass", 1.0).timed_out
    again = _out(first, fork_all)
    first_share = int(again)
    assert 40 < first_share < 64
    assert _out(second, fork_all) == again  # and its neighbour has its own share, all of it


def test_a_fork_bomb_stays_in_its_session(pair: tuple[KernelSandbox, KernelSandbox]) -> None:
    first, second = pair
    made = _out(first, _FORK_ALL + "except OSError as exc:\n    print(kids, type(exc).__name__)")
    kids, refusal = made.split()
    assert int(kids) < 64 and refusal == "BlockingIOError"  # its own pids share
    assert _out(second, "import subprocess; print(subprocess.run(['true']).returncode)") == "0\n"


def test_a_full_disk_is_one_sessions_own(pair: tuple[KernelSandbox, KernelSandbox]) -> None:
    first, second = pair
    filled = _out(
        first,
        "written = 0\n"
        "try:\n"
        "    with open('/work/fill', 'wb') as f:\n"
        "        while True:\n"
        "            f.write(b'x' * (1 << 20)); f.flush(); written += 1\n"
        "except OSError as exc:\n"
        "    print(written, exc.errno)",
    )
    written, errno = filled.split()
    assert int(written) <= 64 and errno == "28"  # ENOSPC at its own 64m
    assert _out(second, "open('/work/f', 'wb').write(b'y' * (8 << 20))") == ""


def test_a_session_that_dies_is_said_lost_and_its_neighbour_keeps_its_state(
    pair: tuple[KernelSandbox, KernelSandbox],
) -> None:
    first, second = pair
    _out(second, "kept = 41")
    died = first.run("import os; os._exit(3)", TIMEOUT)
    assert died.state_lost and "exited with code 3" in (died.error or ""), died.error
    assert _out(second, "print(kept + 1)") == "42\n"
    again = first.run("print('fresh')", TIMEOUT)
    assert again.stdout == "fresh\n"


def test_the_containers_end_loses_each_sessions_state_and_says_so(
    pair: tuple[KernelSandbox, KernelSandbox],
    fork_provider: DockerSandboxProvider,
    docker_client: docker.DockerClient,
) -> None:
    for container in _containers(docker_client, fork_provider):
        docker_client.api.kill(container)
    for session in pair:
        result = session.run("print(1)", TIMEOUT)
        assert result.state_lost, result


def test_random_generators_differ_between_forks(
    pair: tuple[KernelSandbox, KernelSandbox],
) -> None:
    draws = [
        _out(session, "import numpy, random; print(numpy.random.rand(), random.random())")
        for session in pair
    ]
    assert draws[0] != draws[1]


def test_the_container_asks_for_no_privilege(
    pair: tuple[KernelSandbox, KernelSandbox],
    fork_provider: DockerSandboxProvider,
    docker_client: docker.DockerClient,
) -> None:
    (container,) = _containers(docker_client, fork_provider)
    host = docker_client.api.inspect_container(container)["HostConfig"]
    assert host["Privileged"] is False and not host["CapAdd"] and host["CapDrop"] == ["ALL"]
    options = host["SecurityOpt"]
    assert "no-new-privileges" in options
    assert not any("unconfined" in option for option in options)
    (profile,) = [o.removeprefix("seccomp=") for o in options if o.startswith("seccomp=")]
    denied = json.loads(profile)["syscalls"][0]["names"]
    assert {"ptrace", "setns", "bpf", "keyctl", "umount2"} <= set(denied)
    assert not {"unshare", "mount"} & set(denied)  # the fork server's, refused to the cells
