"""taskyard as an MCP server: `/mcp` speaks MCP's streamable HTTP (the `mcp` SDK's transport),
and each deployed agent (every agent registered by the gateway's plugins) is a tool.

A call of an agent's tool is a task of the caller's tenant (the API key the `Admission` checked,
``Authorization: Bearer <key>``), in a fresh session or the one the call names. The SDK has no
MCP tasks yet, so a long run answers on the call's own event stream: a progress notification
for each of the task's status changes and messages (the first names the task, which the REST
API then reaches too), then the result, the task's final answer (a failed or cancelled task's
reason as a tool error). A dropped connection leaves the task running.

The transport is stateless (each request its own MCP session): any gateway replica serves any
request, and nothing of a session outlives its request.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import mcp.types as types
import orjson
from mcp.server import Server, ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from starlette.requests import Request

from services.gateway.deps import get_celery, get_hub, get_store
from taskyard.agentkit.agents import AGENTS
from taskyard.agentkit.spec import AgentSpec
from taskyard.plumbing.settings import GatewaySettings
from taskyard.runtime.events import EventKind
from taskyard.runtime.submission import TaskRequest, submit
from taskyard.runtime.task import SESSION_ID_PATTERN, TaskRecord, TaskStatus

__all__ = ["MCP_PATH", "McpEndpoint", "agent_tools"]

MCP_PATH = "/mcp"
_MAX_INPUT = 200_000  # as a task's input through the REST API
_SESSION_ID = re.compile(SESSION_ID_PATTERN)
_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task": {"type": "string", "description": "What the agent is to do, in full."},
        "session_id": {
            "type": "string",
            "description": "A session to work in (its memory and files); a new one if left out.",
        },
    },
    "required": ["task"],
}


def agent_tools() -> list[types.Tool]:
    """One tool per registered agent, described by its class's docstring."""
    return [_tool(name) for name in sorted(AGENTS)]


def _tool(name: str) -> types.Tool:
    about = (AGENTS.get(name).__doc__ or "").strip().split("\n\n")[0]
    description = " ".join(about.split()) or f"The {name} agent."
    return types.Tool(
        name=name,
        description=f"{description} Runs as a taskyard task; its final answer is the result.",
        input_schema=_INPUT_SCHEMA,
    )


class McpEndpoint:
    """The MCP server of one gateway app: its ASGI handler, and `run` for the app's lifespan."""

    def __init__(self, settings: GatewaySettings) -> None:
        self.settings = settings
        server: Server[Any] = Server(
            "taskyard", version="0.1.0", on_list_tools=self._list_tools, on_call_tool=self._call
        )
        self.manager = StreamableHTTPSessionManager(app=server, stateless=True)
        self.asgi = StreamableHTTPASGIApp(self.manager)

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Serve requests until the block ends (the gateway's lifespan)."""
        async with self.manager.run():
            yield

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=agent_tools())

    async def _call(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        request = ctx.request
        assert isinstance(request, Request)  # the streamable HTTP transport's
        arguments = params.arguments or {}
        refused = _refusal(params.name, arguments)
        if refused is not None:
            return _error(refused)
        record = await self._submit(request, params.name, arguments)
        if isinstance(record, str):
            return _error(record)
        progress = _Progress(ctx)
        await progress.note(f"task {record.id} queued in session {record.session_id}")
        hub = await get_hub(request)
        async for batch in hub.follow(record.id):
            for _, fields in batch.entries:
                note = _note(fields["kind"], orjson.loads(fields["data"]))
                if note is not None:
                    await progress.note(note)
        return await self._outcome(request, record.id)

    async def _submit(
        self, request: Request, agent: str, arguments: dict[str, Any]
    ) -> TaskRecord | str:
        """Submit the task as `POST /v1/tasks` does (the agent's `if_session_busy` holds);
        the task, or why the session refused it."""
        store, celery = await get_store(request), await get_celery(request)
        body = TaskRequest(input=arguments["task"], session_id=arguments.get("session_id"),
                           agent=AgentSpec(agent=agent))  # fmt: skip
        record = body.record(request.state.tenant, body.session_id or uuid.uuid4().hex)
        created = await submit(store, celery, self.settings, record, body.busy_policy())
        if created.outcome == "busy":
            return f"session {record.session_id} is running task {created.task_id}: try later"
        return record

    async def _outcome(self, request: Request, task_id: str) -> types.CallToolResult:
        record = await (await get_store(request)).get(task_id)
        assert record is not None  # it was just followed to its end
        summary = {"task_id": record.id, "session_id": record.session_id,
                   "status": record.status.value}  # fmt: skip
        if record.status != TaskStatus.SUCCEEDED:
            why = f"the task {record.status.value}: {record.error or 'no reason given'}"
            return _error(why, summary)
        text = record.result or ""
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content={**summary, "result": text},
        )


class _Progress:
    """The call's progress notifications, counted (a no-op if the caller asked for none)."""

    def __init__(self, ctx: ServerRequestContext[Any]) -> None:
        self.ctx = ctx
        self.count = 0

    async def note(self, message: str) -> None:
        self.count += 1
        await self.ctx.session.report_progress(self.count, None, message)


def _refusal(agent: str, arguments: dict[str, Any]) -> str | None:
    """Why the call cannot be a task (the caller's to fix), or None."""
    if agent not in AGENTS:
        return f"no agent {agent!r} is deployed here; tools/list names those that are"
    task, session_id = arguments.get("task"), arguments.get("session_id")
    if not isinstance(task, str) or not task.strip() or len(task) > _MAX_INPUT:
        return f"'task' must be a non-empty string of at most {_MAX_INPUT} characters"
    if session_id is not None and not (
        isinstance(session_id, str) and _SESSION_ID.match(session_id)
    ):
        return f"'session_id' must match {SESSION_ID_PATTERN}"
    unknown = sorted(set(arguments) - {"task", "session_id"})
    return f"unknown arguments: {', '.join(unknown)}" if unknown else None


def _note(kind: str, data: dict[str, Any]) -> str | None:
    """A task event as a progress message (model tokens are not: there are too many)."""
    if kind == EventKind.STATUS:
        why = data.get("reason") or data.get("error")
        return f"status {data['status']}" + (f": {why}" if why else "")
    if kind != EventKind.MESSAGE:
        return None
    content, sender = data.get("content"), data.get("sender", "")
    if isinstance(content, dict) and content.get("object") == "action_return":
        failed = " (error)" if content.get("errmsg") else ""
        return f"{content.get('type') or sender} returned{failed}"  # the call's name
    calls = (data.get("formatted") or {}).get("tool_calls") or []
    if calls:
        return f"{sender} calls " + ", ".join(str(call.get("name")) for call in calls)
    return None


def _error(text: str, structured: dict[str, Any] | None = None) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=structured,
        is_error=True,
    )
