"""Forking a session whose interpreter runs (`provider.fork`), on each backend: the new session
gets the source's namespace (variables, functions, classes, imports, arrays, open files) and
working directory as they are now, and from then on each goes its own way. What cannot be
copied is named, never fatal; a source running a cell is refused."""

from __future__ import annotations

import threading
import time

import pytest

from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.sandbox import InterpreterCopy, SandboxBusy, SandboxUnavailable
from taskyard.sandbox.provider import KernelSandboxProvider
from taskyard.sandbox.session import KernelSandbox
from tests.sandbox.conftest import FORKS, ProviderFactory

TIMEOUT = 30.0
SOURCE, NEW = "acme:source", "acme:new"


@pytest.fixture(params=["docker", "fork-server", "bwrap"])
def forking(
    request: pytest.FixtureRequest,
    settings: ToolWorkerSettings,
    make_docker_provider: ProviderFactory,
    make_local_provider: ProviderFactory,
) -> KernelSandboxProvider:
    """One container per session, a fork server's sessions, the local namespace backend."""
    if request.param == "bwrap":
        return make_local_provider(launcher="bwrap")
    request.applymarker(pytest.mark.docker)
    if request.param == "fork-server":
        return make_docker_provider(settings=settings.model_copy(update=FORKS), pool_size=0)
    return make_docker_provider()


def _out(session: KernelSandbox, code: str) -> str:
    result = session.run(code, TIMEOUT)
    assert result.error is None, result.error
    assert not result.state_lost
    return result.stdout.strip()


def _forked(provider: KernelSandboxProvider, setup: str) -> tuple[KernelSandbox, KernelSandbox,
                                                                  InterpreterCopy]:  # fmt: skip
    source = provider.get(SOURCE)
    _out(source, setup)
    copied = provider.fork(SOURCE, NEW)
    assert copied is not None
    return source, provider.get(NEW), copied


def test_the_new_session_has_the_sources_names_as_they_are(
    forking: KernelSandboxProvider,
) -> None:
    setup = (
        "import math, json as j\n"
        "from collections import Counter\n"
        "x = 41\n"
        "data = {'a': [1, 2], 'b': (3,)}\n"
        "alias = data\n"
        "def grow(n):\n"
        "    return n + x\n"
        "class Point:\n"
        "    def __init__(self, v): self.v = v\n"
        "    def twice(self): return Point(self.v * 2)\n"
        "p = Point(5)\n"
        "counts = Counter('abca')\n"
    )
    _, new, copied = _forked(forking, setup)
    assert copied.skipped == {}
    check = (
        "print(x, data, alias is data, grow(1), p.twice().v, type(p).__name__,"
        " math.sqrt(16), j.dumps([1]), counts['a'])"
    )
    assert _out(new, check) == "41 {'a': [1, 2], 'b': (3,)} True 42 10 Point 4.0 [1] 2"
    # The copied function reads the new session's globals, as it did its source's.
    assert _out(new, "x = 1\nprint(grow(1))") == "2"


def test_a_module_imported_from_the_working_directory_is_imported_again(
    forking: KernelSandboxProvider,
) -> None:
    setup = (
        "import os, sys\n"
        "os.makedirs('lib')\n"
        "open('lib/mine.py', 'w').write('VALUE = 7')\n"
        "sys.path.insert(0, os.path.abspath('lib'))\n"
        "import mine\n"
    )
    _, new, copied = _forked(forking, setup)
    assert copied.skipped == {}
    assert _out(new, "print(mine.VALUE, mine.__name__)") == "7 mine"


def test_after_the_fork_neither_session_reaches_the_other(
    forking: KernelSandboxProvider,
) -> None:
    source, new, _ = _forked(forking, "x = 1\nitems = [1]")
    _out(source, "x = 2\nitems.append('source')")
    _out(new, "x = 3\nitems.append('new')\ny = 'only here'")
    assert _out(source, "print(x, items, 'y' in globals())") == "2 [1, 'source'] False"
    assert _out(new, "print(x, items, y)") == "3 [1, 'new'] only here"


def test_the_working_directory_is_copied_and_then_each_sessions_own(
    forking: KernelSandboxProvider,
) -> None:
    setup = (
        "import os\n"
        "os.makedirs('sub', exist_ok=True)\n"
        "open('notes.txt', 'w').write('hello')\n"
        "open('sub/data.bin', 'wb').write(bytes(range(256)) * 1000)\n"
        "log = open('log.txt', 'w')\n"
        "log.write('first ')\n"
    )
    source, new, _ = _forked(forking, setup)
    check = "print(open('notes.txt').read(), open('sub/data.bin', 'rb').read() == bytes(range(256)) * 1000)"  # noqa: E501
    assert _out(new, check) == "hello True"
    # The open file was reopened at its place: writes go on where the source's stopped.
    assert _out(new, "log.write('second')\nlog.flush()\nprint(open('log.txt').read())") == (
        "first second"
    )
    assert not any(f.path.startswith(".taskyard-fork") for f in new.list_files().files)
    assert not any(f.path.startswith(".taskyard-fork") for f in source.list_files().files)
    _out(source, "open('only-source.txt', 'w').write('s')")
    _out(new, "open('notes.txt', 'w').write('changed')")
    assert _out(new, "import os\nprint(os.path.exists('only-source.txt'))") == "False"
    assert _out(source, "print(open('notes.txt').read())") == "hello"


def test_what_cannot_be_copied_is_named_and_the_rest_is_copied(
    forking: KernelSandboxProvider,
) -> None:
    setup = (
        "import socket, threading\n"
        "sock = socket.socket()\n"
        "gen = (i for i in range(3))\n"
        "lock = threading.Lock()\n"
        "kept = 'yes'\n"
    )
    _, new, copied = _forked(forking, setup)
    assert set(copied.skipped) == {"sock", "gen", "lock"}
    assert "socket" in copied.skipped["sock"]
    listed = "print(kept, sorted(__fork_skipped__), 'sock' in globals(), socket.AF_INET > 0)"
    assert _out(new, listed) == "yes ['gen', 'lock', 'sock'] False True"


def test_a_source_running_a_cell_is_refused(forking: KernelSandboxProvider) -> None:
    source = forking.get(SOURCE)
    _out(source, "import time")
    running = threading.Thread(target=source.run, args=("time.sleep(3)", TIMEOUT))
    running.start()
    try:
        while not source.cell_running:
            time.sleep(0.01)
        with pytest.raises(SandboxBusy):
            forking.fork(SOURCE, NEW)
    finally:
        running.join()
    assert NEW not in forking.sessions()


def test_a_source_without_a_running_interpreter_has_nothing_to_copy(
    forking: KernelSandboxProvider,
) -> None:
    assert forking.fork(SOURCE, NEW) is None
    assert NEW not in forking.sessions()


@pytest.mark.docker
@pytest.mark.parametrize("shape", [{}, FORKS])
def test_numpy_arrays_and_frames_are_copied_and_independent(
    make_docker_provider: ProviderFactory, settings: ToolWorkerSettings, shape: dict[str, int]
) -> None:
    roomy = settings.model_copy(update={**shape, "sandbox_memory": "512m"})
    provider = make_docker_provider(settings=roomy, pool_size=0)
    setup = (
        "import numpy as np, pandas as pd\n"
        "a = np.arange(3_000_000, dtype=np.float64).reshape(3000, 1000)\n"  # 24 MB: 2 parts
        "frame = pd.DataFrame({'k': [1, 2, 3], 'v': ['x', 'y', 'z']})\n"
        "rng = np.random.default_rng(7)\n"
    )
    source, new, copied = _forked(provider, setup)
    assert copied.bytes > 24_000_000
    check = "print(a.sum(), a.flags.aligned, frame.v.tolist(), rng.integers(1000))"
    same = _out(source, check)
    assert _out(new, check) == same
    _out(new, "a[0, 0] = -1\nframe.loc[0, 'v'] = 'changed'")
    assert _out(source, "print(a[0, 0], frame.v[0])") == "0.0 x"


@pytest.mark.docker
def test_the_fork_servers_sessions_copy_files_inside_their_container(
    make_docker_provider: ProviderFactory, settings: ToolWorkerSettings
) -> None:
    """Two sessions of one fork server: the working directory goes from one to the other in
    the kernel (`copy_from`); sessions in containers of their own go through the worker."""
    for shape, beside in ((FORKS, (2, False)), ({}, None)):
        provider = make_docker_provider(settings=settings.model_copy(update=shape), pool_size=0)
        source, target = provider.get(SOURCE), provider.get(NEW)
        _out(source, "import os\nos.makedirs('d')\nopen('d/x', 'w').write('x')\nopen('y', 'w')")
        _out(target, "open('y', 'w').write('replaced')")
        assert target.copy_files_from(source) == beside
        if beside is not None:
            assert _out(target, "print(open('d/x').read(), repr(open('y').read()))") == "x ''"


@pytest.mark.docker
def test_a_snapshot_that_does_not_fit_the_disk_refuses_the_fork_and_leaves_nothing(
    make_docker_provider: ProviderFactory, settings: ToolWorkerSettings
) -> None:
    small = settings.model_copy(update={"sandbox_memory": "256m", "sandbox_disk": "16m"})
    provider = make_docker_provider(settings=small, pool_size=0)
    source = provider.get(SOURCE)
    _out(source, "big = bytes(24 << 20)\nopen('kept.txt', 'w').write('kept')")
    with pytest.raises(SandboxUnavailable, match="No space left"):
        provider.fork(SOURCE, NEW)
    assert NEW not in provider.sessions()
    assert [f.path for f in source.list_files().files] == ["kept.txt"]
    assert _out(source, "print(len(big))") == str(24 << 20)
