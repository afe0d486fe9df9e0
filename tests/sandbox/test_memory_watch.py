"""The fork server's memory watch (kernel/memory.py) on this machine's own processes: a
"session" is a forked process and what it forks, as a fork server's session is its executor's
tree."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from taskyard.sandbox.kernel.memory import MemoryWatch, proportional, resident
from taskyard.sandbox.kernel.processes import descendants, stop_tree

MIB = 1 << 20


# The "executor": a fresh interpreter (not a fork of pytest, whose pages it would share and
# whose proportional share would move as the children fork). It says "r", waits for a line,
# touches ROOT MiB, forks CHILDREN that touch CHILD MiB each, and says "c" for each and itself
# (one write each: under PYTHONUNBUFFERED, print's "c" and newline would be two, interleaved).
_SESSION = """
import os, sys, time
root_mib, children, child_mib = (int(a) for a in sys.argv[1:])
print("r", flush=True)
sys.stdin.readline()
held = bytearray(root_mib << 20)
held[::4096] = b"x" * len(held[::4096])  # every page touched
for _ in range(children):
    if os.fork() == 0:
        own = bytearray(child_mib << 20)
        own[::4096] = b"y" * len(own[::4096])
        os.write(1, b"c\\n")
        time.sleep(60)
        os._exit(0)
os.write(1, b"c\\n")
time.sleep(60)
"""


@contextmanager
def session(root_mib: int, children: int, child_mib: int) -> Iterator[tuple[int, int]]:
    """A fresh "executor" that, once its baseline is read, touches `root_mib` MiB and forks
    `children` that touch `child_mib` MiB each; (its pid, its baseline) once all hold it."""
    argv = [sys.executable, "-c", _SESSION, str(root_mib), str(children), str(child_mib)]
    root = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert root.stdin is not None and root.stdout is not None
    try:
        assert root.stdout.readline() == "r\n"
        baseline = proportional(root.pid)
        root.stdin.write("go\n")
        root.stdin.flush()
        for _ in range(children + 1):
            assert root.stdout.readline() == "c\n"
        yield root.pid, baseline
    finally:
        stop_tree(keep=-1, root=root.pid)
        root.kill()
        root.wait()
        root.stdin.close()
        root.stdout.close()


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
