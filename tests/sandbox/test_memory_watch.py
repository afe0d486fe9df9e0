"""The fork server's memory watch (kernel/memory.py) on this machine's own processes: a
"session" is a forked process and what it forks, as a fork server's session is its executor's
tree."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager

from taskyard.sandbox.kernel.memory import MemoryWatch, proportional, resident
from taskyard.sandbox.kernel.processes import descendants, stop_tree

MIB = 1 << 20


@contextmanager
def session(root_mib: int, children: int, child_mib: int) -> Iterator[tuple[int, int]]:
    """A forked "executor" that, once its baseline is read, touches `root_mib` MiB and forks
    `children` that touch `child_mib` MiB each; (its pid, its baseline) once all hold it."""
    go_read, go_write = os.pipe()
    ready_read, ready_write = os.pipe()
    root = os.fork()
    if root == 0:
        os.write(ready_write, b"r")
        os.read(go_read, 1)
        _held = bytearray(b"x" * (root_mib * MIB))  # touched, and kept while it sleeps
        for _ in range(children):
            if os.fork() == 0:
                _own = bytearray(b"y" * (child_mib * MIB))
                os.write(ready_write, b"c")
                time.sleep(60)
                os._exit(0)
        os.write(ready_write, b"c")
        time.sleep(60)
        os._exit(0)
    try:
        assert os.read(ready_read, 1) == b"r"
        baseline = proportional(root)
        os.write(go_write, b"g")
        for _ in range(children + 1):
            assert os.read(ready_read, 1) == b"c"
        yield root, baseline
    finally:
        stop_tree(keep=-1, root=root)
        os.kill(root, signal.SIGKILL)
        os.waitpid(root, 0)
        for fd in (go_read, go_write, ready_read, ready_write):
            os.close(fd)


def test_a_sessions_children_count_with_it() -> None:
    with session(root_mib=0, children=3, child_mib=40) as (root, baseline):
        over = MemoryWatch(share=64 * MIB).over({"s": (root, baseline)})
    assert over["s"] >= 120 * MIB


def test_pages_shared_copy_on_write_count_once() -> None:
    with session(root_mib=60, children=3, child_mib=0) as (root, baseline):
        processes = [root, *descendants([root])[root]]
        assert sum(resident(pid) for pid in processes) - baseline > 200 * MIB  # in full, each
        over = MemoryWatch(share=100 * MIB).over({"s": (root, baseline)})
    assert over == {}


def test_a_process_gone_counts_nothing() -> None:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    assert proportional(pid) == resident(pid) == 0
