"""MCP's stdio transport, relayed through cells.

The tool worker runs the MCP client (the `mcp` SDK's); a local MCP server runs here, in the
session's sandbox, as a process a cell started. Each client message reaches it through a cell
that calls `exchange` (the worker writes those cells:
`shared/taskyard/agentkit/actions/mcp/stdio.py`), which writes the message lines to the server's
stdin and reads its stdout until the answer, so the server is one more process of the session's own
code: the sandbox's limits hold for it, and an interrupted cell kills it with the rest. Standard
library only, as the whole kernel.

`exchange` prints what the server wrote, one message per line as it wrote them, then one
status line, ``{"relay": {"exited": status or null, "stderr": its last words, "overflow":
bool}}``: the worker takes the last line for the status and the others for messages.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import selectors
import subprocess
import sys
import threading
import time
from typing import Any

__all__ = ["close", "exchange"]

_STDERR_KEPT = 2000  # characters of the server's stderr the worker is told (why it failed)
_CLOSE_WAIT_S = 2.0


class _Server:
    """One server process and what it wrote that nobody read yet."""

    def __init__(self, argv: list[str]) -> None:
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert self.process.stdout is not None and self.process.stderr is not None
        self.stdout = self.process.stdout.fileno()
        os.set_blocking(self.stdout, False)
        self.pending = bytearray()
        self.stderr: collections.deque[str] = collections.deque(maxlen=_STDERR_KEPT)
        # A full stderr pipe would stall the server: a thread keeps reading it.
        threading.Thread(target=self._drain, args=(self.process.stderr,), daemon=True).start()

    def _drain(self, stream: Any) -> None:
        for chunk in iter(lambda: stream.read1(4096), b""):
            self.stderr.extend(chunk.decode("utf-8", "replace"))

    def write(self, lines: list[str]) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        for line in lines:
            stdin.write(line.encode() + b"\n")
        stdin.flush()

    def read_line(self, deadline: float) -> str | None:
        """The next line the server wrote, or None at its stdout's end or the deadline."""
        with selectors.DefaultSelector() as selector:
            selector.register(self.stdout, selectors.EVENT_READ)
            while b"\n" not in self.pending:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    return None
                chunk = os.read(self.stdout, 1 << 16)
                if not chunk:
                    return None
                self.pending += chunk
        line, _, rest = bytes(self.pending).partition(b"\n")
        self.pending = bytearray(rest)
        return line.decode("utf-8", "replace")


_servers: dict[str, _Server] = {}


def exchange(
    key: str, argv: list[str], lines: list[str], wait_ids: list[Any], timeout_s: float, limit: int
) -> None:
    """Start the server `key` names if it is not running, write `lines` to it, and print what
    it answers, until every request of `wait_ids` is answered, it asks something itself (a
    request of its own), it ends, `timeout_s` passes, or the answer passes `limit` characters."""
    server = _servers.get(key)
    if server is None:
        server = _servers[key] = _Server(argv)
    overflow, deadline = False, time.monotonic() + timeout_s
    try:
        server.write(lines)
        overflow = _relay(server, {_id(i) for i in wait_ids}, deadline, limit)
    except (BrokenPipeError, ValueError):  # it ended before taking the lines
        pass
    exited = server.process.poll()
    if exited is not None:
        _servers.pop(key, None)
    status = {"exited": exited, "stderr": "".join(server.stderr), "overflow": overflow}
    sys.stdout.write(json.dumps({"relay": status}) + "\n")


def _relay(server: _Server, waiting: set[str], deadline: float, limit: int) -> bool:
    """Print the server's lines until the answer is complete; whether it passed `limit`."""
    printed = 0
    while waiting:
        line = server.read_line(deadline)
        if line is None:
            return False
        printed += len(line) + 1
        if printed > limit:
            return True
        sys.stdout.write(line + "\n")
        message = _message(line)
        if "method" in message and "id" in message:
            return False  # the server asks: the client answers in the next exchange
        waiting.discard(_id(message.get("id")))
    return False


def _message(line: str) -> dict[str, Any]:
    try:
        message = json.loads(line)
    except ValueError:
        return {}
    return message if isinstance(message, dict) else {}


def _id(value: Any) -> str:
    # JSON-RPC ids are strings or numbers: 1 and "1" are different requests.
    return json.dumps(value)


def close(key: str) -> None:
    """Stop the server `key` names: its stdin closes, then it is terminated, then killed."""
    server = _servers.pop(key, None)
    if server is None:
        return
    process = server.process
    if process.stdin is not None:
        with contextlib.suppress(OSError):
            process.stdin.close()
    for stop in (process.terminate, process.kill):
        try:
            process.wait(_CLOSE_WAIT_S)
            return
        except subprocess.TimeoutExpired:
            stop()
    process.wait(_CLOSE_WAIT_S)
