"""The kernel as a plain process: the JSON-lines protocol and what user code cannot break."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from taskyard.sandbox.kernel import INTERRUPTED, MAX_LINE_BYTES, OUTPUT_LIMIT
from taskyard.sandbox.kernel.replies import fit_line
from taskyard.sandbox.kernel.wire import LineBuffer, TooLong
from taskyard.sandbox.local.kernel_copy import KERNEL_SOURCE
from tests.sandbox.forge import forge_from_a_child


class Kernel:
    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-P", "-m", "kernel"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={"PYTHONPATH": str(KERNEL_SOURCE.parent)},
            text=True,
        )
        self.ids = 0
        assert json.loads(self.line()) == {"ready": True}

    def run(self, code: str) -> dict[str, Any]:
        call_id = self.start(code)
        reply = json.loads(self.line())
        assert (reply["id"], reply["nonce"]) == (call_id, f"nonce-{call_id}")
        return reply

    def start(self, code: str) -> int:
        self.ids += 1
        self.send(json.dumps({"id": self.ids, "nonce": f"nonce-{self.ids}", "code": code}))
        return self.ids

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def line(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline()


@pytest.fixture
def kernel() -> Iterator[Kernel]:
    started = Kernel()
    yield started
    started.process.kill()
    started.process.wait()


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + 20
    while not path.exists():  # act only once the cell runs
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


def test_reply_carries_everything(kernel: Kernel) -> None:
    reply = kernel.run("import sys\nprint('o')\nsys.stderr.write('e')\n6 * 7")
    assert reply == {
        "id": 1,
        "nonce": "nonce-1",
        "stdout": "o\n",
        "stderr": "e",
        "result": "42",
        "error": None,
        "interrupted": False,
        "display": [],
    }


def test_none_and_statements_have_no_result(kernel: Kernel) -> None:
    assert kernel.run("None")["result"] is None
    assert kernel.run("x = 3")["result"] is None
    assert kernel.run("x")["result"] == "3"
    assert kernel.run("_")["result"] == "3"  # the last value, as in IPython


def test_syntax_error_is_reported(kernel: Kernel) -> None:
    reply = kernel.run("def (:")
    assert "SyntaxError" in reply["error"]
    assert "executor.py" not in reply["error"]


def test_user_code_cannot_write_to_the_protocol(kernel: Kernel) -> None:
    # Only fds 0-2: as root (these tests), /proc/<supervisor>/fd is open to the cell; inside a
    # sandbox (uid 65534, no capabilities) it is not: see test_session.py.
    forge = (
        "import os\n"
        'line = b\'{"id": 2, "nonce": "nonce-2", "result": "FORGED"}\\n\'\n'
        "for fd in (0, 1, 2):\n"
        "    os.write(fd, line)\n"
        "input()"
    )
    reply = kernel.run(forge)
    assert "EOFError" in reply["error"]  # stdin is /dev/null for the cell, not the protocol
    assert kernel.run("'still in sync'")["result"] == "'still in sync'"


def test_a_forked_process_cannot_forge_the_next_reply(kernel: Kernel, tmp_path: Path) -> None:
    # A raw fork() (no Python fork hooks) keeps every fd, the executor's channel included; the
    # child then writes a well-formed reply into every socket it holds, while the next cell runs.
    proof = tmp_path / "sent"
    forged = "{'stdout': '', 'stderr': '', 'result': \"'FORGED'\", 'error': None}"
    kernel.run(forge_from_a_child(forged, 0.3, str(proof)))
    assert kernel.run("import time\ntime.sleep(0.8)\n'real'")["result"] == "'real'"
    assert proof.read_text() == "1"  # it did write on the channel


def test_exit_is_an_error_not_an_exit(kernel: Kernel) -> None:
    assert "SystemExit: 3" in kernel.run("raise SystemExit(3)")["error"]
    assert kernel.run("1")["result"] == "1"


def test_forked_child_never_answers(kernel: Kernel) -> None:
    reply = kernel.run("import os\npid = os.fork()\npid > 0")
    assert reply["result"] == "True"
    assert kernel.run("os.waitpid(pid, 0)[1]")["result"] == "0"


def test_interrupt_stops_the_cell_and_its_children_and_keeps_the_namespace(
    kernel: Kernel, tmp_path: Path
) -> None:
    kernel.run("kept = 5")
    started = tmp_path / "started"
    code = (
        "import os\n"
        "for _ in range(3):\n"
        "    if os.fork() == 0:\n"
        "        while True: pass\n"
        f"open({str(started)!r}, 'w').close()\n"
        "while True: pass"
    )
    call_id = kernel.start(code)
    _wait_for(started)
    kernel.send(json.dumps({"interrupt": call_id}))
    reply = json.loads(kernel.line())
    assert (reply["error"], reply["interrupted"]) == (INTERRUPTED, True)
    leftover = kernel.run(
        "import os\n"
        "me = str(os.getpid())\n"
        "[p for p in os.listdir('/proc') if p.isdigit()\n"
        " and open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()[1] == me]"
    )
    assert leftover["result"] == "[]"  # killed and reaped: not even zombies hold a pid
    assert kernel.run("kept")["result"] == "5"


def test_an_interrupt_right_behind_the_request_still_stops_the_cell(kernel: Kernel) -> None:
    # It may reach the supervisor before the executor runs the cell; it must not be lost.
    call_id = kernel.start("while True: pass")
    kernel.send(json.dumps({"interrupt": call_id}))
    assert json.loads(kernel.line())["interrupted"] is True


def test_interrupt_for_another_call_is_ignored(kernel: Kernel) -> None:
    kernel.run("kept = 6")
    kernel.send(json.dumps({"interrupt": 1}))  # a late interrupt for a call that ended
    assert kernel.run("import time\ntime.sleep(0.3)\nkept")["result"] == "6"


def test_bad_request_gets_an_error_reply(kernel: Kernel) -> None:
    kernel.send("not json")
    reply = json.loads(kernel.line())
    assert reply["id"] is None and reply["error"].startswith("bad request")
    assert kernel.run("2")["result"] == "2"


def test_huge_output_is_capped(kernel: Kernel) -> None:
    reply = kernel.run("print('x' * 300_000)\n'y' * 300_000")
    assert reply["stdout"].startswith("x" * 1000)
    assert "more characters not shown" in reply["stdout"]
    assert len(reply["stdout"]) < OUTPUT_LIMIT + 100
    assert len(reply["result"]) < OUTPUT_LIMIT + 100


def test_thread_output_stays_with_its_cell(kernel: Kernel) -> None:
    started_late = (
        "import threading, time\n"
        "def chatter():\n"
        "    print('mine, early')\n"
        "    time.sleep(0.3)\n"
        "    print('late')\n"
        "t = threading.Thread(target=chatter)\n"
        "t.start()\n"
        "time.sleep(0.2)"
    )
    assert kernel.run(started_late)["stdout"] == "mine, early\n"
    assert kernel.run("time.sleep(0.6)\nprint('next')")["stdout"] == "next\n"


def test_the_kernel_ends_with_its_input_even_mid_cell(kernel: Kernel, tmp_path: Path) -> None:
    started = tmp_path / "started"
    kernel.start(
        f"import os\nif os.fork() == 0:\n    while True: pass\nopen({str(started)!r}, 'w')\n"
        "while True: pass"
    )
    _wait_for(started)
    assert kernel.process.stdin is not None
    kernel.process.stdin.close()
    assert kernel.process.wait(timeout=5) == 0


def test_a_dead_interpreter_ends_the_kernel_with_its_status(kernel: Kernel) -> None:
    kernel.start("import os\nos._exit(7)")
    assert kernel.line() == ""  # no reply: the kernel ended
    assert kernel.process.wait(timeout=5) == 7


def test_every_reply_fits_a_line() -> None:
    reply = {"id": 1, "nonce": "n", "stdout": "é" * OUTPUT_LIMIT, "stderr": "\x00" * OUTPUT_LIMIT}
    line = fit_line({**reply, "result": "€" * OUTPUT_LIMIT, "error": "x" * OUTPUT_LIMIT})
    assert len(line) <= MAX_LINE_BYTES and line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line)["error"].startswith("x" * 1000)


def test_a_line_buffer_refuses_an_endless_line_early() -> None:
    lines = LineBuffer(limit=1000)
    lines.feed(b"short\n" + b"x" * 900)
    assert lines.pop_line() == b"short"
    with pytest.raises(TooLong):
        lines.feed(b"x" * 200)


def test_a_lease_not_renewed_ends_the_kernel_even_mid_cell(kernel: Kernel) -> None:
    kernel.send(json.dumps({"lease": 1.5}))
    kernel.start("while True: pass")  # stdin stays open: only the lease can end it
    started = time.monotonic()
    assert kernel.process.wait(timeout=60) == 0  # ended, whatever the machine's load
    assert time.monotonic() - started > 1.4  # not before its lease ran out


def test_a_renewed_lease_keeps_the_kernel_and_none_means_stdin_alone(kernel: Kernel) -> None:
    assert kernel.run("x = 1")["error"] is None
    time.sleep(1.5)  # no lease given yet: silence ends nothing
    for _ in range(4):
        kernel.send(json.dumps({"lease": 1.0}))
        time.sleep(0.5)
    assert kernel.run("x + 1")["result"] == "2"  # alive, state kept, no reply to a lease
