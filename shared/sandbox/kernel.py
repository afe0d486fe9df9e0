"""The taskyard kernel: a long-lived Python interpreter driven by JSON lines.

It runs inside a sandbox (a container, or a bubblewrap namespace) and uses the standard
library only, so any Python 3.11 can run it as a plain file.

Protocol, one JSON object per line:

- on start it writes ``{"ready": true}``;
- it reads ``{"id": ..., "code": "..."}`` on stdin and answers
  ``{"id", "stdout", "stderr", "result", "error"}`` on stdout, where `result` is the repr of
  the cell's last expression (None when it is None or absent, as in IPython) and `error` the
  traceback text of an exception;
- SIGINT during a cell stops it with the error "KeyboardInterrupt / timed out"; the namespace
  is kept. SIGINT between cells is ignored;
- it exits when stdin ends.

The protocol streams are private duplicates of fds 0 and 1; fd 0 then reads /dev/null and fd 1
goes to stderr, so neither user prints nor child processes can corrupt or steal a message.
"""

from __future__ import annotations

import ast
import io
import json
import linecache
import os
import signal
import sys
import traceback
from typing import Any, TextIO

INTERRUPTED = "KeyboardInterrupt / timed out"
OUTPUT_LIMIT = 200_000  # characters kept per stream per cell; the rest is counted, not kept


class CappedText(io.TextIOBase):
    """A text sink that keeps the first OUTPUT_LIMIT characters and counts the rest."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._kept = 0
        self._dropped = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        room = OUTPUT_LIMIT - self._kept
        if room > 0:
            self._parts.append(text[:room])
            self._kept += min(room, len(text))
        self._dropped += max(0, len(text) - max(room, 0))
        return len(text)

    def getvalue(self) -> str:
        text = "".join(self._parts)
        if self._dropped:
            text += f"\n[... {self._dropped} more characters not shown]\n"
        return text


class Kernel:
    """A persistent namespace that runs cells and turns each into one reply."""

    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
        self.pid = os.getpid()
        self.running = False
        self._cells = 0

    def on_sigint(self, signum: int, frame: Any) -> None:
        # Only a running cell is interrupted; a late signal must not kill the idle loop.
        if self.running:
            raise KeyboardInterrupt

    def run(self, code: str) -> dict[str, Any]:
        """Run one cell; return its stdout, stderr, last value and error."""
        out, err = CappedText(), CappedText()
        result: str | None = None
        error: str | None = None
        sys.stdout, sys.stderr = out, err
        try:
            self.running = True
            result = self._execute(code)
        except KeyboardInterrupt:
            error = INTERRUPTED
        except BaseException as exc:
            error = self._format_error(exc)
        finally:
            if os.getpid() != self.pid:
                os._exit(0)  # a child the cell forked must never answer or read requests
            self.running = False
            sys.stdout, sys.stderr = sys.__stderr__, sys.__stderr__
        stdout, stderr = out.getvalue(), err.getvalue()
        return {"stdout": stdout, "stderr": stderr, "result": result, "error": error}

    def _execute(self, code: str) -> str | None:
        self._cells += 1
        filename = f"<cell-{self._cells}>"
        # Registered so tracebacks can quote the cell's lines.
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        tree = ast.parse(code, filename)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, filename, "exec"), self.namespace)
        if last is None:
            return None
        value = eval(compile(ast.Expression(last.value), filename, "eval"), self.namespace)
        if value is None:
            return None
        self.namespace["_"] = value
        return repr(value)

    @staticmethod
    def _format_error(exc: BaseException) -> str:
        tb = exc.__traceback__
        # Drop the kernel's own frames: the user should see their cell only.
        while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
            tb = tb.tb_next
        return "".join(traceback.format_exception(type(exc), exc, tb))


def _private_streams() -> tuple[TextIO, TextIO]:
    """Move the protocol off fds 0 and 1, so user code cannot touch it by accident."""
    proto_in = os.fdopen(os.dup(0), "r", encoding="utf-8")
    proto_out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - lives as long as the process
    sys.stdout = sys.stderr
    return proto_in, proto_out


def _send(stream: TextIO, message: dict[str, Any]) -> None:
    stream.write(json.dumps(message) + "\n")
    stream.flush()


def _reply(kernel: Kernel, line: str) -> dict[str, Any]:
    try:
        request = json.loads(line)
        code = request["code"]
    except (ValueError, KeyError, TypeError) as exc:
        return {
            "id": None,
            "stdout": "",
            "stderr": "",
            "result": None,
            "error": f"bad request: {exc!r}",
        }
    return {"id": request.get("id"), **kernel.run(str(code))}


def main() -> None:
    """Serve cells until stdin ends."""
    proto_in, proto_out = _private_streams()
    kernel = Kernel()
    signal.signal(signal.SIGINT, kernel.on_sigint)
    _send(proto_out, {"ready": True})
    for line in proto_in:
        if line.strip():
            _send(proto_out, _reply(kernel, line))


if __name__ == "__main__":
    main()
