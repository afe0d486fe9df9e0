"""Kernel-backed sinks, on every backend: objects the kernel keeps for a process outside its
memory (IPC objects, message queues, keys, inotify instances, timers, file descriptors). A cell
that asks for many is refused or bounded, and the host's own IPC namespace is untouched."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from taskyard.sandbox.docker.spec import IPC_SYSCTLS, ULIMITS
from taskyard.sandbox.provider import KernelSandboxProvider

TIMEOUT = 30.0
EMFILE = 24
ProviderFactory = Callable[..., KernelSandboxProvider]

# Each call that makes a kernel object, tried 1000 times: the errno of the first failure, or 0.
MAKE_OBJECTS = """
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
IPC_NEW = 0o1000 | 0o600  # IPC_CREAT, rw for the owner; key IPC_PRIVATE (0) makes a new one
def first_failure(make):
    for _ in range(1000):
        if make() == -1:
            return ctypes.get_errno()
    return 0
timer = ctypes.c_void_p()
arm64 = os.uname().machine == 'aarch64'
{
    'shmget': first_failure(lambda: libc.shmget(0, 1 << 20, IPC_NEW)),
    'msgget': first_failure(lambda: libc.msgget(0, IPC_NEW)),
    'semget': first_failure(lambda: libc.semget(0, 250, IPC_NEW)),
    'mq_open': first_failure(lambda: libc.mq_open(f'/q{os.urandom(4).hex()}'.encode(),
                                                  os.O_CREAT | os.O_RDWR, 0o600, None)),
    'add_key': first_failure(lambda: libc.syscall(217 if arm64 else 248, b'user',
                                                  os.urandom(4).hex().encode(), b'v', 1, -2)),
    'inotify_init1': first_failure(lambda: libc.inotify_init1(0)),
    'timer_create': first_failure(lambda: libc.timer_create(1, None, ctypes.byref(timer))),
    'memfd_secret': first_failure(lambda: libc.syscall(447, 0)),
}
"""
# File descriptors, each kernel memory: an eventfd and a timerfd at a time until refused.
FILL_FDS = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
made = 0
while made < 100_000:
    if libc.eventfd(0, 0) == -1 or libc.timerfd_create(1, 0) == -1:
        break
    made += 2
made, ctypes.get_errno()
"""


def _host_ipc() -> list[str]:
    """The host IPC namespace's System V objects, as it lists them."""
    return [Path(f"/proc/sysvipc/{kind}").read_text() for kind in ("shm", "msg", "sem")]


@pytest.fixture
def host_ipc_unchanged() -> Iterator[None]:
    before = _host_ipc()
    yield
    assert _host_ipc() == before


def test_kernel_objects_outside_the_limits_cannot_be_made(
    host_ipc_unchanged: None, provider: KernelSandboxProvider
) -> None:
    made = provider.get("t:objects").run(MAKE_OBJECTS, TIMEOUT)
    assert made.error is None, made.error
    assert made.result == (
        "{'shmget': 1, 'msgget': 1, 'semget': 1, 'mq_open': 1, 'add_key': 1, "
        "'inotify_init1': 1, 'timer_create': 1, 'memfd_secret': 1}"
    )  # EPERM, each: the kernel's filter, on every backend


def test_file_descriptors_are_bounded_per_process(provider: KernelSandboxProvider) -> None:
    made = provider.get("t:fds").run(FILL_FDS, TIMEOUT)
    assert made.result is not None, made.error
    count, errno = made.result.strip("()").split(", ")
    assert 200 < int(count) < ULIMITS["nofile"] and int(errno) == EMFILE


def test_no_message_queue_bytes(provider: KernelSandboxProvider) -> None:
    code = "import resource\nresource.getrlimit(resource.RLIMIT_MSGQUEUE)"
    assert provider.get("t:rlimit").run(code, TIMEOUT).result == "(0, 0)"


def test_the_containers_ipc_namespace_holds_nothing(
    host_ipc_unchanged: None, make_docker_provider: ProviderFactory
) -> None:
    code = (
        "import os\n"
        "sysctls = {name: open('/proc/sys/' + name.replace('.', '/')).read().split()\n"
        f"           for name in {sorted(IPC_SYSCTLS)!r}}}\n"
        "try:\n"
        "    open('/dev/mqueue/q', 'w')\n"  # a plain open() reaches the namespace's queues
        "except OSError as e:\n"
        "    print(e.strerror)\n"
        "sysctls"
    )
    result = make_docker_provider().get("t:ipc").run(code, TIMEOUT)
    assert result.stdout == "No space left on device\n"
    expected = {name: value.split() for name, value in IPC_SYSCTLS.items()}
    assert result.result == repr(dict(sorted(expected.items())))
