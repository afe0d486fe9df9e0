"""The tool worker's MCP jobs: calls of a task's MCP servers' tools, and listings of their
tools for the agent worker. Each runs the SDK's client on an event loop of the job's own
thread: a local server's cells must run in that thread (`taskyard.agentkit.actions.mcp.stdio`), and
a remote one's connection lives no longer than the call."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import dataclass
from typing import Any

from taskyard.agentkit.actions.mcp.client import McpClient, McpUnavailable
from taskyard.agentkit.actions.mcp.listing import McpListing
from taskyard.agentkit.schema import ActionReturn, ActionStatusCode, AgentMessage
from taskyard.plumbing.settings import McpSettings
from taskyard.runtime.jobs import McpListJob, ToolRunJob
from taskyard.sandbox import SandboxProvider

__all__ = ["McpCalls"]


@dataclass(eq=False)
class _Running:
    loop: asyncio.AbstractEventLoop
    task: asyncio.Task[Any]
    stopped: bool = False  # set before the cancel is sent: how the call ends then is moot


class McpCalls:
    """Runs MCP jobs for any tenant and session; `sandboxes` holds the local servers."""

    def __init__(self, settings: McpSettings, sandboxes: SandboxProvider) -> None:
        self.client = McpClient(settings, sandboxes)
        self._lock = threading.Lock()
        self._running: dict[str, set[_Running]] = {}  # a session's calls under way

    def call(self, job: ToolRunJob) -> AgentMessage:
        """The call's result; whatever failed is in it as the error the model reads."""
        server, call = job.mcp, job.call
        assert server is not None
        if not isinstance(call.parameters, dict):
            ret = ActionReturn(type=call.name, state=ActionStatusCode.ARGS_ERROR,
                               errmsg="the arguments must be a JSON object")  # fmt: skip
            return AgentMessage.tool_result(call, ret)
        return AgentMessage.tool_result(call, asyncio.run(self._stoppable(job, call.parameters)))

    async def _stoppable(self, job: ToolRunJob, arguments: dict[str, Any]) -> ActionReturn:
        """The call, which `interrupt` stops (its task was cancelled: the result is refused)."""
        assert job.mcp is not None
        task = asyncio.current_task()
        assert task is not None
        running = _Running(asyncio.get_running_loop(), task)
        tool = job.call.name.removeprefix(f"{job.mcp.name}.")
        with self._lock:
            self._running.setdefault(job.session_key, set()).add(running)
        try:
            ret = await self.client.call_tool(job.mcp, tool, arguments, job.tenant, job.session_key)
        except asyncio.CancelledError:
            if not running.stopped:
                raise
        finally:
            with self._lock:
                self._running[job.session_key].discard(running)
                if not self._running[job.session_key]:
                    del self._running[job.session_key]
        # The SDK may report the cancel as a failure of its own (a task group's error when
        # a stream closes under it), or an answer may beat it: either way it is refused.
        if running.stopped:
            stopped = "the call was stopped: its task was cancelled"
            return ActionReturn(type=job.call.name, args=arguments, errmsg=stopped,
                                state=ActionStatusCode.API_ERROR)  # fmt: skip
        return ret

    def interrupt(self, session_key: str) -> bool:
        """Stop the session's MCP calls under way, from any thread; False if none runs. (A
        local server's cell is stopped with the session's other cells, by the sandbox.)"""
        with self._lock:
            running = list(self._running.get(session_key, ()))
        for call in running:
            call.stopped = True
            with contextlib.suppress(RuntimeError):  # it ended meanwhile, its loop closed
                call.loop.call_soon_threadsafe(call.task.cancel)
        return bool(running)

    def list(self, job: McpListJob) -> McpListing:
        """The server's tools, or why it could not be listed."""
        listed = self.client.list_tools(job.server, job.tenant, job.session_key)
        try:
            return McpListing(tools=asyncio.run(listed))
        except McpUnavailable as exc:
            return McpListing(error=str(exc))
