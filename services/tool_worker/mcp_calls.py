"""The tool worker's MCP jobs: calls of a task's MCP servers' tools, and listings of their
tools for the agent worker. Each runs the SDK's client on an event loop of the job's own
thread: a local server's cells must run in that thread (`shared.actions.mcp.stdio`), and a
remote one's connection lives no longer than the call."""

from __future__ import annotations

import asyncio

from shared.actions.mcp.client import McpClient, McpUnavailable
from shared.actions.mcp.listing import McpListing
from shared.jobs import McpListJob, ToolRunJob
from shared.sandbox import SandboxProvider
from shared.schema import ActionReturn, ActionStatusCode, AgentMessage
from shared.settings import Settings

__all__ = ["McpCalls"]


class McpCalls:
    """Runs MCP jobs for any tenant and session; `sandboxes` holds the local servers."""

    def __init__(self, settings: Settings, sandboxes: SandboxProvider) -> None:
        self.client = McpClient(settings, sandboxes)

    def call(self, job: ToolRunJob) -> AgentMessage:
        """The call's result; whatever failed is in it as the error the model reads."""
        server, call = job.mcp, job.call
        assert server is not None
        tool = call.name.removeprefix(f"{server.name}.")
        if not isinstance(call.parameters, dict):
            ret = ActionReturn(type=call.name, state=ActionStatusCode.ARGS_ERROR,
                               errmsg="the arguments must be a JSON object")  # fmt: skip
            return AgentMessage.tool_result(call, ret)
        called = self.client.call_tool(server, tool, call.parameters, job.tenant, job.session_key)
        return AgentMessage.tool_result(call, asyncio.run(called))

    def list(self, job: McpListJob) -> McpListing:
        """The server's tools, or why it could not be listed."""
        listed = self.client.list_tools(job.server, job.tenant, job.session_key)
        try:
            return McpListing(tools=asyncio.run(listed))
        except McpUnavailable as exc:
            return McpListing(error=str(exc))
