"""kernel.py as a plain process: the JSON-lines protocol and what user code cannot break."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.sandbox.local import KERNEL


class Kernel:
    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(KERNEL)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert json.loads(self._line()) == {"ready": True}

    def run(self, code: str, request_id: object = 1) -> dict[str, Any]:
        self.send(json.dumps({"id": request_id, "code": code}))
        return json.loads(self._line())

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def _line(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline()


@pytest.fixture
def kernel() -> Iterator[Kernel]:
    started = Kernel()
    yield started
    started.process.kill()
    started.process.wait()


def test_reply_carries_everything(kernel: Kernel) -> None:
    reply = kernel.run("import sys\nprint('o')\nsys.stderr.write('e')\n6 * 7", request_id="r1")
    assert reply == {"id": "r1", "stdout": "o\n", "stderr": "e", "result": "42", "error": None}


def test_none_and_statements_have_no_result(kernel: Kernel) -> None:
    assert kernel.run("None")["result"] is None
    assert kernel.run("x = 3")["result"] is None
    assert kernel.run("x")["result"] == "3"
    assert kernel.run("_")["result"] == "3"  # the last value, as in IPython


def test_syntax_error_is_reported(kernel: Kernel) -> None:
    reply = kernel.run("def (:")
    assert "SyntaxError" in reply["error"]
    assert "kernel.py" not in reply["error"]


def test_user_code_cannot_touch_the_protocol(kernel: Kernel) -> None:
    reply = kernel.run("import os\nos.write(1, b'{\"id\": 99}\\n')\ninput()")
    assert "EOFError" in reply["error"]  # stdin is /dev/null for the cell, not the protocol
    assert kernel.run("'still in sync'")["result"] == "'still in sync'"


def test_exit_is_an_error_not_an_exit(kernel: Kernel) -> None:
    assert "SystemExit: 3" in kernel.run("raise SystemExit(3)")["error"]
    assert kernel.run("1")["result"] == "1"


def test_forked_child_never_answers(kernel: Kernel) -> None:
    reply = kernel.run("import os\npid = os.fork()\npid > 0")
    assert reply["result"] == "True"
    assert kernel.run("os.waitpid(pid, 0)[1]")["result"] == "0"


def test_sigint_stops_the_cell_and_keeps_the_namespace(kernel: Kernel, tmp_path: Path) -> None:
    kernel.run("kept = 5")
    started = tmp_path / "started"
    code = f"open({str(started)!r}, 'w').close()\nwhile True: pass"
    kernel.send(json.dumps({"id": 2, "code": code}))
    deadline = time.monotonic() + 20
    while not started.exists():  # interrupt only once the cell runs
        assert time.monotonic() < deadline, "the cell never started"
        time.sleep(0.01)
    kernel.process.send_signal(signal.SIGINT)
    reply = json.loads(kernel._line())
    assert reply["error"] == "KeyboardInterrupt / timed out"
    assert kernel.run("kept")["result"] == "5"


def test_sigint_between_cells_is_ignored(kernel: Kernel) -> None:
    kernel.run("kept = 6")
    kernel.process.send_signal(signal.SIGINT)
    assert kernel.run("kept")["result"] == "6"


def test_bad_request_gets_an_error_reply(kernel: Kernel) -> None:
    kernel.send("not json")
    reply = json.loads(kernel._line())
    assert reply["id"] is None and reply["error"].startswith("bad request")
    assert kernel.run("2")["result"] == "2"


def test_huge_output_is_capped(kernel: Kernel) -> None:
    reply = kernel.run("print('x' * 300_000)")
    assert reply["stdout"].startswith("x" * 1000)
    assert "more characters not shown" in reply["stdout"]
    assert len(reply["stdout"]) < 201_000
