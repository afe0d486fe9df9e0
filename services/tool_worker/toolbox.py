"""The tool worker's toolbox: every registered action, run by one `ActionExecutor` over one
sandbox provider per worker process, and the MCP client over the same sandboxes. It runs a
call; the protocol around it (claim, forward, store) is `services.tool_worker.call_runner`."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Coroutine
from typing import TypeVar

from services.tool_worker.mcp_calls import McpCalls
from taskyard.agentkit.actions import ActionExecutor, ActionResources, CellLog
from taskyard.agentkit.schema import AgentMessage, ToolCall
from taskyard.plumbing.loop import cancel_others
from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.runtime.jobs import ToolRunJob
from taskyard.sandbox import SandboxProvider, make_sandbox_provider

__all__ = ["Toolbox"]

T = TypeVar("T")


class Toolbox:
    """Runs tool calls. The executor and the sandboxes are made on first use, by one thread
    only, and kept: actions hold per-session state, the provider the sessions' interpreters."""

    def __init__(self, settings: ToolWorkerSettings, node: str = "-") -> None:
        self.settings = settings
        self.node = node  # the worker's Celery node name: what its sandboxes are labelled with
        self._lock = threading.Lock()
        self._sandboxes: SandboxProvider | None = None
        self._executor: ActionExecutor | None = None
        self._mcp: McpCalls | None = None
        self._cells: CellLog | None = None
        self._loops = threading.local()  # each pool thread's event loop (`run_here`)

    def keep_cells(self, cells: CellLog) -> None:
        """Where the interpreter keeps sessions' cells for a replay; before the first use."""
        with self._lock:
            if self._executor is not None:
                raise RuntimeError("keep_cells after the actions were made")
            self._cells = cells

    @property
    def made_sandboxes(self) -> SandboxProvider | None:
        """The sandbox provider if it was made already (metrics read it; they make nothing)."""
        return self._sandboxes

    def run(self, call: ToolCall, session_key: str) -> AgentMessage:
        """Run the call for the session ("tenant:session_id"); failures of the tool come back
        in the `ActionReturn`, and the reply quotes the call's id."""
        return self.run_here(self._ready().core(call, session_key))

    def run_here(self, call: Coroutine[None, None, T]) -> T:
        """`call` on this thread's own event loop, kept between calls: `asyncio.run` (what
        `ActionExecutor` does) makes and closes a loop per call, measured at 0.1 ms of CPU.
        As there, the call runs alone (in the caller's context, log ids and all) and what it
        leaves running is cancelled when it returns. A tool call's claim and result run here
        too (`services.tool_worker.thread_stores`)."""
        runner: asyncio.Runner | None = getattr(self._loops, "runner", None)
        if runner is None:
            runner = self._loops.runner = asyncio.Runner()
        return runner.run(_alone(call), context=contextvars.copy_context())

    def run_job(self, job: ToolRunJob) -> AgentMessage:
        """Run a tool job's call: an MCP server's tool when the job names one, else an
        action's."""
        if job.mcp is not None:
            return self.mcp().call(job)
        return self.run(job.call, job.session_key)

    def mcp(self) -> McpCalls:
        """The MCP client of the worker, over its sandboxes (made on first use)."""
        self._ready()
        assert self._mcp is not None
        return self._mcp

    def start(self, node: str | None = None) -> int:
        """Make the sandboxes now, for the worker's start-up (as `node`, its Celery node name):
        remove what an earlier run of this worker left (how many), then run a cell in a fresh
        sandbox.

        Raises `SandboxUnavailable` saying why the configured backend cannot run here.
        """
        self.node = node or self.node
        self._ready()
        assert self._sandboxes is not None
        removed = self._sandboxes.remove_orphans()
        self._sandboxes.check()
        return removed

    def sandboxes(self) -> SandboxProvider:
        """The worker's sandbox provider (made on first use): sessions' files are there too."""
        self._ready()
        assert self._sandboxes is not None
        return self._sandboxes

    def _ready(self) -> ActionExecutor:
        with self._lock:
            if self._executor is None:
                self._sandboxes = make_sandbox_provider(self.settings, self.node)
                resources = ActionResources(
                    settings=self.settings, sandboxes=self._sandboxes, cells=self._cells
                )
                self._executor = ActionExecutor.from_registry(resources)
                self._mcp = McpCalls(self.settings, self._sandboxes)
            return self._executor

    def interrupt(self, session_key: str) -> bool:
        """Stop the session's running cell, from any thread (a task's cancel): every process
        it started is killed and its `run` returns within the interrupt grace, state kept
        where the kernel stops; and its calls of remote MCP servers. False when no call of
        the session is under way."""
        if self._sandboxes is None or self._mcp is None:
            return False
        stopped = self._mcp.interrupt(session_key)  # a remote MCP server's call
        return self._sandboxes.interrupt(session_key) or stopped

    def has_sandbox(self, session_key: str) -> bool:
        """Whether the session holds an interpreter here."""
        return self._sandboxes is not None and session_key in self._sandboxes.sessions()

    def release(self, session_key: str) -> None:
        """Stop the session's interpreter (its session was forgotten); from any thread."""
        if self._sandboxes is not None:
            self._sandboxes.release(session_key)

    def sessions(self) -> list[str]:
        """The sessions whose interpreters this worker holds."""
        return self._sandboxes.sessions() if self._sandboxes is not None else []

    def reap_idle(self) -> dict[str, str | None]:
        """Stop interpreters idle too long: each session's reason its state is lost (None
        when it had none)."""
        if self._sandboxes is None:
            return {}
        sandboxes = self._sandboxes
        return {key: sandboxes.lost_reason(key) for key in sandboxes.reap_idle()}

    def close(self) -> None:
        if self._sandboxes is not None:
            self._sandboxes.close_all()


async def _alone(call: Coroutine[None, None, T]) -> T:
    try:
        return await call
    finally:
        await cancel_others()
