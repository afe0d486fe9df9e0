"""A live fork between two sessions of one fork server: the snapshot handed over in memory, a
sealed memfd written behind the fork's answer by a copy-on-write child of the source
(kernel/handover.py). The attacks are the source's against what it handed over (a copy of the
descriptor kept, a thread still writing, a mapping that keeps it unsealed, its writer killed),
and any session's against the supervisor that passes descriptors on (an unsealed file, one
that is not a memfd, one over the share, no writer's pipe, descriptors sent outside a
hand-over)."""

from __future__ import annotations

import pytest

from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.sandbox import SandboxUnavailable
from taskyard.sandbox.provider import KernelSandboxProvider
from taskyard.sandbox.session import KernelSandbox
from tests.sandbox.conftest import FORKS, ProviderFactory

pytestmark = pytest.mark.docker
TIMEOUT = 30.0
SOURCE, NEW = "acme:source", "acme:new"
_ARRAYS = "import numpy as np\na = np.arange(1 << 22, dtype=np.float64)\n"  # 32 MiB
_SUM = str(float((1 << 22) * ((1 << 22) - 1) // 2))


@pytest.fixture
def forks(
    make_docker_provider: ProviderFactory, settings: ToolWorkerSettings
) -> KernelSandboxProvider:
    roomy = settings.model_copy(update={**FORKS, "sandbox_memory": "256m"})
    return make_docker_provider(settings=roomy, pool_size=0)


def _out(session: KernelSandbox, code: str) -> str:
    result = session.run(code, TIMEOUT)
    assert result.error is None, result.error
    assert not result.state_lost
    return result.stdout.strip()


def _forked(provider: KernelSandboxProvider, setup: str) -> tuple[KernelSandbox, KernelSandbox]:
    source = provider.get(SOURCE)
    _out(source, setup)
    assert provider.fork(SOURCE, NEW) is not None
    return source, provider.get(NEW)


def test_the_arrays_are_mapped_from_the_snapshot_and_independent_both_ways(
    forks: KernelSandboxProvider,
) -> None:
    source, new = _forked(forks, _ARRAYS)
    # The new session's array is a view of its private mapping of the snapshot: not copied.
    owner = "base = a\nwhile isinstance(base, np.ndarray):\n    base = base.base\n"
    assert _out(new, owner + "print(type(base.obj).__name__, a.flags.writeable, a.sum())") == (
        f"mmap True {_SUM}"
    )
    _out(new, "a[:] = -1")
    assert _out(source, "print(a.sum())") == _SUM
    _out(source, "a[:] = 7")
    assert _out(new, "print(a.min(), a.max())") == "-1.0 -1.0"
    assert _out(source, "print(a.min(), a.max())") == "7.0 7.0"
    assert not any(f.path.startswith(".taskyard-fork") for f in source.list_files().files)


# In the source: the module's hand-over list made to keep a copy of the snapshot's descriptor
# and start a thread that, once the writer sealed it, tries for a second every way to change it.
_KEEP_AND_SCRIBBLE = """
def _attack():
    import errno, fcntl, mmap, os, threading, time
    snapshot = __import__('kernel.snapshot').snapshot
    said = snapshot._said = []

    def scribble(fd):
        tries = {
            'write': lambda: os.pwrite(fd, b'X' * 4096, 4096),
            'truncate': lambda: os.ftruncate(fd, 4096),
            'grow': lambda: os.ftruncate(fd, 1 << 30),
            'map': lambda: mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_WRITE),
            'unseal': lambda: fcntl.fcntl(fd, fcntl.F_ADD_SEALS, 0),
            'allocate': lambda: os.posix_fallocate(fd, 0, 1 << 30),
        }
        sealed = time.monotonic() + 5.0
        while fcntl.fcntl(fd, fcntl.F_GET_SEALS) & 15 != 15 and time.monotonic() < sealed:
            time.sleep(0.001)
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            for name, attempt in tries.items():
                try:
                    attempt()
                    said.append(name + ' worked')
                except OSError as exc:
                    said.append(name + ' ' + errno.errorcode[exc.errno])
            time.sleep(0.01)

    class Keeper(list):
        def append(self, handed):
            threading.Thread(target=scribble, args=(os.dup(handed[0]),), daemon=True).start()
            super().append(handed)

    snapshot._sealed = Keeper()

_attack()
del _attack
"""


def test_the_source_cannot_change_the_snapshot_after_handing_it_over(
    forks: KernelSandboxProvider,
) -> None:
    source, new = _forked(forks, _ARRAYS + _KEEP_AND_SCRIBBLE)
    _out(source, "import time\ntime.sleep(1.2)")  # the thread has tried everything by now
    said = set(_out(source, "print(sorted(set(__import__('kernel.snapshot').snapshot._said)))")
               .strip("[]").replace("'", "").split(", "))  # fmt: skip
    assert not [s for s in said if s.endswith("worked")], said
    assert {"write EPERM", "truncate EPERM", "grow EPERM", "map EPERM", "unseal EPERM"} <= said
    assert _out(new, "print(a.sum(), a[1024:1030].tolist())") == (
        f"{_SUM} [1024.0, 1025.0, 1026.0, 1027.0, 1028.0, 1029.0]"
    )


# In the source: the save replaced by one that hands over `_BAD`'s descriptors instead.
_HAND_OVER_INSTEAD = """
def _attack():
    import fcntl, os
    snapshot = __import__('kernel.snapshot').snapshot

    def save_sealed(namespace, most):
        snapshot._sealed.append({bad})
        print('{{"skipped": {{}}, "bytes": 1, "parts": 0}}')

    snapshot.save_sealed = save_sealed

_attack()
del _attack
"""
_PIPE = "os.pipe()[0]"
_SIZED = (  # a memfd sealed as the writer leaves it before the copy: in size only
    "(lambda fd: (os.write(fd, b'x'), fcntl.fcntl(fd, fcntl.F_ADD_SEALS, 6),"
    " fd)[-1])(os.memfd_create('s', os.MFD_ALLOW_SEALING))"
)
_BAD = {
    "unsealed": (f"(os.memfd_create('s', os.MFD_ALLOW_SEALING), {_PIPE})", "not sealed"),
    "write-sealed only": (
        "((lambda fd: (os.write(fd, b'x'), fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE),"
        f" fd)[-1])(os.memfd_create('s', os.MFD_ALLOW_SEALING)), {_PIPE})",
        "not sealed",
    ),
    "a regular file": (f"(os.open('plain', os.O_RDWR | os.O_CREAT), {_PIPE})", "not a memory file"),
    "a pipe": (f"({_PIPE}, {_PIPE})", "not a memory file"),
    "over the share": (
        "((lambda fd: (os.ftruncate(fd, 300 << 20), fcntl.fcntl(fd, fcntl.F_ADD_SEALS, 15),"
        f" fd)[-1])(os.memfd_create('s', os.MFD_ALLOW_SEALING)), {_PIPE})",
        "over the session's memory share",
    ),
    "no writer's pipe": (
        f"({_SIZED}, os.open('plain', os.O_RDWR | os.O_CREAT))",
        "without its writer's pipe",
    ),
    "one descriptor": (f"({_SIZED},)", "no memory file with its writer's pipe"),
}


@pytest.mark.parametrize("bad", list(_BAD))
def test_the_supervisor_refuses_a_snapshot_that_is_not_a_sealed_memfd_within_the_share(
    forks: KernelSandboxProvider, bad: str
) -> None:
    made, refusal = _BAD[bad]
    source = forks.get(SOURCE)
    _out(source, "x = 1\n" + _HAND_OVER_INSTEAD.format(bad=made))
    with pytest.raises(SandboxUnavailable, match=f"the snapshot was refused: .*{refusal}"):
        forks.fork(SOURCE, NEW)
    assert NEW not in forks.sessions()
    assert _out(source, "print(x)") == "1"


def test_a_snapshot_over_the_share_is_refused_before_it_is_written(
    forks: KernelSandboxProvider,
) -> None:
    """Three arrays over one buffer pickle as three copies: 300 MiB for a share of 256m. The
    source's save refuses it, so no memory file of that size is made outside any count."""
    source = forks.get(SOURCE)
    _out(source, "import numpy as np\na = np.ones(100 << 17)\nviews = [a[:], a[:]]")
    with pytest.raises(SandboxUnavailable, match="over the session's share"):
        forks.fork(SOURCE, NEW)
    assert NEW not in forks.sessions()
    assert _out(source, "print(a.sum())") == str(float(100 << 17))


# A cell sends the write ends of pipes to the supervisor over the executor's own socket, with a
# frame, and closes its own copies: each read end then ends (EOF) once nobody holds its write
# end, that is, once the supervisor closed what it was sent. A second batch rides with the
# save of a hand-over, after the snapshot's own descriptor.
_SEND_PIPES = """
import gc, json, os, select, socket, struct, time
channel = next(o for o in gc.get_objects()
               if isinstance(o, socket.socket) and o.family == socket.AF_UNIX)

def send_pipes(n):
    pipes = [os.pipe() for _ in range(n)]
    body = json.dumps({'started': True}).encode()
    socket.send_fds(channel, [struct.pack('>I', len(body)) + body], [w for _, w in pipes])
    for _, w in pipes:
        os.close(w)
    return [r for r, _ in pipes]

def all_closed(reads, within=5.0):
    end = time.monotonic() + within
    open_ = set(reads)
    while open_ and time.monotonic() < end:
        for r in select.select(list(open_), [], [], 0.1)[0]:
            if os.read(r, 1) == b'':
                open_.discard(r)
    return not open_
"""


def test_descriptors_sent_outside_a_hand_over_are_closed(forks: KernelSandboxProvider) -> None:
    source = forks.get(SOURCE)
    _out(source, _SEND_PIPES)
    assert _out(source, "print(all_closed(send_pipes(2) + send_pipes(9)))") == "True"
    # A hand-over's call keeps the first two descriptors only: what rides after is closed.
    patch = (
        "def _attack():\n"
        "    snapshot = __import__('kernel.snapshot').snapshot\n"
        "    save = snapshot.save_sealed\n"
        "    def save_sealed(namespace, most):\n"
        "        save(namespace, most)\n"
        "        snapshot._late = send_pipes(3)\n"
        "    snapshot.save_sealed = save_sealed\n"
        "_attack()\n"
        "del _attack\n"
    )
    _out(source, "x = 1\n" + patch)
    with pytest.raises(SandboxUnavailable, match=r"the snapshot was refused: .*not a memory file"):
        forks.fork(SOURCE, NEW)
    # The first pipes were taken as the snapshot and refused: every one of them was closed.
    assert _out(source, "print(all_closed(__import__('kernel.snapshot').snapshot._late))") == (
        "True"
    )


def test_the_mapping_counts_in_the_new_sessions_memory_and_not_the_sources(
    forks: KernelSandboxProvider,
) -> None:
    """The new session's share holds what it maps, at once: its address space counts the
    mapping, and so does its proportional size (the pages are mapped when it loads, untouched
    or not). The source's share is its own again after the hand-over."""
    source, new = _forked(forks, "import numpy as np\na = np.ones(160 << 17)")  # 160 MiB
    over = new.run("b = np.ones(120 << 17)", TIMEOUT)  # 280 MiB in one process: over 256m
    assert over.error is not None and "MemoryError" in over.error, over.error
    # Two children of 60 MiB each: 280 MiB in the session, if the mapping counts.
    hoard = new.run(
        "import os, time\n"
        "for _ in range(2):\n"
        "    if os.fork() == 0:\n"
        "        blob = bytearray(60 << 20)\n"
        "        blob[::4096] = b'x' * len(blob[::4096])\n"
        "        time.sleep(60)\n"
        "        os._exit(0)\n"
        "time.sleep(60)",
        TIMEOUT,
    )
    assert hoard.state_lost and "out of memory" in (hoard.error or ""), hoard.error
    assert _out(source, "b = np.ones(80 << 17)\nprint(a.sum() + b.sum())") == str(float(240 << 17))


def test_the_fork_is_the_source_at_the_instant_it_answered(forks: KernelSandboxProvider) -> None:
    """The copy is written behind the answer, from the source's pages as they were: what the
    source does right after (before the new session ran anything) does not reach it."""
    source, new = _forked(forks, _ARRAYS)
    _out(source, "a[:] = 7\nb = 1")
    assert _out(new, "print(a.sum(), 'b' in globals())") == f"{_SUM} False"
    assert _out(source, "print(a.min(), a.max())") == "7.0 7.0"


def test_ending_the_source_right_after_the_fork_keeps_the_copy(
    forks: KernelSandboxProvider,
) -> None:
    """The source's writer is one of its processes: its end waits for the writer first."""
    _forked(forks, _ARRAYS)
    forks.release(SOURCE)
    assert _out(forks.get(NEW), "print(a.sum())") == _SUM


# In the source: its writer spoiled, by the source's own code: killed while it writes (slowed
# down so that it still does), or kept from sealing by a writable shared mapping of the memory
# file (made by the writer's own code, so that it exists before the seal is asked for).
_SPOIL_WRITER = """
def _attack():
    import mmap, os, signal, time
    snapshot = __import__('kernel.snapshot').snapshot
    handover = __import__('kernel.handover').handover
    save, fill = snapshot.save_sealed, handover._fill

    def slow_fill(fd, pieces):
        time.sleep(3)
        fill(fd, pieces)

    def mapped_fill(fd, pieces):
        held = mmap.mmap(fd, 4096, mmap.MAP_SHARED)
        fill(fd, pieces)

    def save_sealed(namespace, most):
        save(namespace, most)
        {after}

    handover._fill = {fill}
    snapshot.save_sealed = save_sealed

_attack()
del _attack
"""
_SPOILS = {
    "killed": {"fill": "slow_fill", "after": "os.kill(max(handover._writers), signal.SIGKILL)"},
    "kept from sealing": {"fill": "mapped_fill", "after": "pass"},
}


@pytest.mark.parametrize("spoil", list(_SPOILS))
def test_a_spoiled_writer_ends_the_new_session_saying_so_and_nothing_else(
    forks: KernelSandboxProvider, spoil: str
) -> None:
    """The fork answered before the copy was written, so a writer that fails cannot refuse
    it: the new session's load does, before any of its code runs; the session ends and its
    next call says its state was lost. The source goes on."""
    source, new = _forked(forks, _ARRAYS + _SPOIL_WRITER.format(**_SPOILS[spoil]))
    lost = new.run("print(a.sum())", TIMEOUT)
    assert lost.state_lost, lost
    said = f"{lost.error} {lost.state_lost_reason}"
    assert "could not be loaded" in said and "writer ended before" in said, said
    assert _out(source, "print(a.sum())") == _SUM


def test_a_handed_snapshot_loads_before_the_new_sessions_next_call_if_no_files_come(
    forks: KernelSandboxProvider,
) -> None:
    """The kernel loads a handed snapshot once the fork's files are copied (`copy_from`); if
    that copy never comes (its worker gone between the two), the new session's next call
    loads it first."""
    source = forks.get(SOURCE)
    _out(source, _ARRAYS)
    new = forks.get(NEW)
    handed = source.hand_over(new, TIMEOUT)
    assert handed is not None and handed.error is None, handed
    assert _out(new, "print(a.sum())") == _SUM


def test_a_fork_forks_again_at_once_and_a_source_forks_twice(
    forks: KernelSandboxProvider,
) -> None:
    """A fork whose snapshot is still being written or loaded can be forked (its hand-over
    waits for its load), and a source can fork again while its first writer may still run."""
    source, _ = _forked(forks, _ARRAYS)
    assert forks.fork(NEW, "acme:grandchild") is not None
    assert forks.fork(SOURCE, "acme:second") is not None
    _out(source, "a[:] = 0")
    for key in (NEW, "acme:grandchild", "acme:second"):
        assert _out(forks.get(key), "print(a.sum())") == _SUM, key


# In the source: children that sleep until the session has no process to spare (EAGAIN).
_FILL_PIDS = """
import os, time
held = []
while True:
    try:
        pid = os.fork()
    except BlockingIOError:
        break
    if pid == 0:
        time.sleep(120)
        os._exit(0)
    held.append(pid)
"""


def test_a_source_with_no_process_to_spare_writes_its_snapshot_before_answering(
    forks: KernelSandboxProvider,
) -> None:
    """The writer is a process of the source's session: where its process limit leaves none,
    the source writes the copy itself, and the fork is the same."""
    source, new = _forked(forks, _ARRAYS + _FILL_PIDS)
    assert _out(new, "print(a.sum(), len(held) > 0)") == f"{_SUM} True"
    assert _out(
        source, "import os\ntry:\n    os.fork()\nexcept BlockingIOError:\n    print('full')"
    ) == ("full")
