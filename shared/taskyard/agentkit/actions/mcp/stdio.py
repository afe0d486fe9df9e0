"""A local MCP server's stdio, inside the session's sandbox: an MCP client transport whose
messages reach the server through cells.

The sandbox has no network, and the worker talks to its kernel in cells, so the server runs
there as a process a cell starts (`shared/taskyard/sandbox/kernel/mcp_relay.py`), and each message
the SDK's client sends becomes one cell: it writes the message to the server's stdin and prints
what the server answers. Notifications wait for the next request's cell. The cells run in the
caller's own thread, one at a time, blocking the event loop while they run: the loop serves
this one connection, and a kernel must be started from the thread that keeps it (the local
backend ties a kernel to its starting thread's life).

Each connection starts its own server process and stops it when it closes: a local server
lives for one listing or one call. What it keeps in files of the working directory stays.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp.types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from taskyard.agentkit.actions.ipython import state_lost_note
from taskyard.errors import TaskyardError
from taskyard.sandbox import CodeSandbox, ExecutionResult, SandboxError
from taskyard.sandbox.kernel import OUTPUT_LIMIT

__all__ = ["RELAY_LIMIT", "LocalServerFailed", "SandboxStdio"]

# What one cell may print of the server's answer: a cell's stdout keeps OUTPUT_LIMIT characters,
# and the relay's status line comes after.
RELAY_LIMIT = OUTPUT_LIMIT - 10_000
_CELL_MARGIN_S = 5.0  # beyond the relay's own deadline, for the cell around it
_CLOSE_S = 10.0
_Read = SessionMessage | Exception
_Streams = tuple[MemoryObjectReceiveStream[_Read], MemoryObjectSendStream[SessionMessage]]


class LocalServerFailed(TaskyardError):
    """The local server ended, sent too much, or the sandbox could not relay it; says why."""


@dataclass
class _Answer:
    """What one exchange cell printed: the server's messages and the relay's status."""

    messages: list[SessionMessage | Exception] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)

    @property
    def asked(self) -> bool:
        """Whether the server sent a request of its own (the client answers it next)."""
        return any(
            isinstance(m, SessionMessage) and isinstance(m.message, types.JSONRPCRequest)
            for m in self.messages
        )


class SandboxStdio:
    """A connection to the server `argv` in `sandbox`, ending by `timeout_s` from now.

    After a failure, `failure` says why (the client only sees its connection close); `notes`
    holds what the model must read besides the result: the session's interpreter had lost its
    state (the relay's first cell learnt it, so no later cell of the model's will)."""

    def __init__(self, sandbox: CodeSandbox, argv: Sequence[str], timeout_s: float) -> None:
        self.sandbox = sandbox
        self.argv = list(argv)
        self.deadline = time.monotonic() + timeout_s
        self.key = uuid.uuid4().hex
        self.failure: str | None = None
        self.notes: list[str] = []
        self._unsent: list[str] = []
        self._outstanding: set[str] = set()
        self._started = False

    @asynccontextmanager
    async def open(self) -> AsyncIterator[_Streams]:
        """The SDK client's streams; the server stops when they close."""
        reads_in, reads = anyio.create_memory_object_stream[_Read](16)
        writes, writes_out = anyio.create_memory_object_stream[SessionMessage](16)
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._pump, writes_out, reads_in)
                try:
                    yield reads, writes
                finally:
                    group.cancel_scope.cancel()
        finally:
            self._close()

    async def _pump(
        self,
        writes: MemoryObjectReceiveStream[SessionMessage],
        reads: MemoryObjectSendStream[_Read],
    ) -> None:
        """Carry the client's messages to the server and its answers back, until either ends
        (closing `reads` then wakes the client's waiting requests)."""
        async with writes, reads:
            async for sent in writes:
                message = sent.message
                self._unsent.append(message.model_dump_json(by_alias=True, exclude_unset=True))
                if isinstance(message, types.JSONRPCRequest):
                    self._outstanding.add(_id(message.id))
                if isinstance(message, types.JSONRPCNotification):
                    continue  # it goes with the next request
                try:
                    await self._answer(reads)
                except LocalServerFailed as failed:
                    self.failure = str(failed)
                    return

    async def _answer(self, reads: MemoryObjectSendStream[_Read]) -> None:
        """Exchange until no request waits, or the server asks something of its own."""
        while True:
            answer = self._exchange()
            for item in answer.messages:
                await reads.send(item)
                reply = item.message if isinstance(item, SessionMessage) else None
                if isinstance(reply, types.JSONRPCResponse | types.JSONRPCError):
                    self._outstanding.discard(_id(reply.id))
            if answer.status.get("exited") is not None:
                raise LocalServerFailed(_ended(answer.status))  # the next cell would restart it
            if not self._outstanding or answer.asked:
                return

    def _exchange(self) -> _Answer:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise LocalServerFailed("it did not answer in time")
        lines, self._unsent = self._unsent, []
        waits = [json.loads(i) for i in sorted(self._outstanding)]
        arguments = f"{self.key!r}, {self.argv!r}, {lines!r}, {waits!r}, {left!r}, {RELAY_LIMIT}"
        answer = _parsed(self._cell(f"exchange({arguments})", left + _CELL_MARGIN_S))
        if answer.status.get("overflow"):
            raise LocalServerFailed(f"its answer passed {RELAY_LIMIT} characters")
        return answer

    def _cell(self, call: str, timeout: float) -> ExecutionResult:
        try:
            outcome = self.sandbox.run(_relay_call(call), timeout)
        except SandboxError as exc:
            raise LocalServerFailed(f"the sandbox could not run it: {exc}") from exc
        if outcome.state_lost and self._started:
            raise LocalServerFailed("the sandbox was restarted while it ran")
        if outcome.state_lost:
            self.notes.append(state_lost_note(outcome.state_lost_reason))
        self._started = True
        if outcome.error or outcome.timed_out:
            why = (outcome.error or "the relay's cell timed out").strip()
            raise LocalServerFailed(f"the sandbox could not relay it: {why[-500:]}")
        return outcome

    def _close(self) -> None:
        """Stop the server process; the sandbox's end would stop it anyway, so a sandbox that
        cannot run the cell now is left to that."""
        if self._started:
            with suppress(SandboxError):
                self.sandbox.run(_relay_call(f"close({self.key!r})"), _CLOSE_S)


def _relay_call(call: str) -> str:
    # One expression, so the session's namespace gains no name.
    return f"__import__('kernel.mcp_relay', fromlist=['mcp_relay']).{call}"


def _parsed(outcome: ExecutionResult) -> _Answer:
    *lines, last = outcome.stdout.rstrip("\n").split("\n")
    try:
        status = json.loads(last)["relay"]
    except (ValueError, KeyError, TypeError):
        raise LocalServerFailed("the relay's answer was cut or garbled") from None
    return _Answer([_message(line) for line in lines], status)


def _message(line: str) -> SessionMessage | Exception:
    """One line the server wrote; a line that is no JSON-RPC message goes to the client as the
    error it is (as the SDK's own stdio client does)."""
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc


def _id(request_id: Any) -> str:
    # As the relay keys them: 1 and "1" are different requests.
    return json.dumps(request_id)


def _ended(status: dict[str, Any]) -> str:
    said = str(status.get("stderr") or "").strip()
    return f"it ended (exit status {status.get('exited')})" + (f": {said[-1000:]}" if said else "")
