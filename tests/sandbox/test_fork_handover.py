"""A live fork between two sessions of one fork server: the snapshot handed over in memory, a
sealed memfd (kernel/handover.py). The attacks are the source's against what it handed over
(a copy of the descriptor kept, a thread still writing), and any session's against the
supervisor that passes descriptors on (an unsealed file, one that is not a memfd, one over
the share, descriptors sent outside a hand-over)."""

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
# and start a thread that tries, for a second after the save, every way to change it.
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
        def append(self, fd):
            threading.Thread(target=scribble, args=(os.dup(fd),), daemon=True).start()
            super().append(fd)

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


# In the source: the save replaced by one that hands over `_BAD`'s descriptor instead.
_HAND_OVER_INSTEAD = """
def _attack():
    import fcntl, os
    snapshot = __import__('kernel.snapshot').snapshot

    def save_sealed(namespace, most):
        fd = {bad}
        snapshot._sealed.append(fd)
        print('{{"skipped": {{}}, "bytes": 1, "parts": 0}}')

    snapshot.save_sealed = save_sealed

_attack()
del _attack
"""
_BAD = {
    "unsealed": ("os.memfd_create('s', os.MFD_ALLOW_SEALING)", "not sealed"),
    "write-sealed only": (
        "(lambda fd: (os.write(fd, b'x'), fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE),"
        " fd)[-1])(os.memfd_create('s', os.MFD_ALLOW_SEALING))",
        "not sealed",
    ),
    "a regular file": ("os.open('plain', os.O_RDWR | os.O_CREAT)", "not a memory file"),
    "a pipe": ("os.pipe()[0]", "not a memory file"),
    "over the share": (
        "(lambda fd: (os.ftruncate(fd, 300 << 20), fcntl.fcntl(fd, fcntl.F_ADD_SEALS, 15),"
        " fd)[-1])(os.memfd_create('s', os.MFD_ALLOW_SEALING))",
        "over the session's memory share",
    ),
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
    # A hand-over's call keeps the first descriptor only: what rides after it is closed.
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
    # The first pipe was taken as the snapshot and refused: every one of them was closed.
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
