"""taskyard as an MCP server: `/mcp` speaks MCP's streamable HTTP (the `mcp` SDK's transport),
and each agent is a tool: the default agent (`default_agent`, on every stack) and every agent
registered by the gateway's plugins.

A call of an agent's tool is a task of the caller's tenant (the API key the `Admission` checked,
``Authorization: Bearer <key>``), in a fresh session or the one the call names. The SDK has no
MCP tasks yet, so a long run answers on the call's own event stream: a progress notification
for each of the task's status changes and messages (the first names the task, which the REST
API then reaches too), then the result, the task's final answer (a failed or cancelled task's
reason as a tool error). The client's cancellation of the call cancels the task
(`cancel`); a connection dropped otherwise leaves it running.

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

from services.gateway import default_agent
from services.gateway.deps import get_celery, get_hub, get_store
from services.gateway.resources.mcp.cancel import (
    Cancellations,
    ClientIds,
    McpCall,
    cancel_notified,
    in_flight,
)
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
    """The default agent's tool, then one per registered agent (described by its class's
    docstring). A registered agent of the default's name takes its place."""
    default = [] if default_agent.NAME in AGENTS else [_tool(default_agent.NAME)]
    return default + [_tool(name) for name in sorted(AGENTS)]


def _tool(name: str) -> types.Tool:
    return types.Tool(
        name=name,
        description=f"{_about(name)} Runs as a taskyard task; its final answer is the result.",
        input_schema=_INPUT_SCHEMA,
    )


def _about(name: str) -> str:
    if name not in AGENTS:
        return default_agent.DESCRIPTION
    about = (AGENTS.get(name).__doc__ or "").strip().split("\n\n")[0]
    return " ".join(about.split()) or f"The {name} agent."


def _spec(tool: str) -> AgentSpec | None:
    """The spec a call of `tool` runs; None if no agent is deployed under that name."""
    if tool in AGENTS:
        return AgentSpec(agent=tool)
    return default_agent.spec() if tool == default_agent.NAME else None


class McpEndpoint:
    """The MCP server of one gateway app: its ASGI handler, and `run` for the app's lifespan."""

    def __init__(self, settings: GatewaySettings) -> None:
        self.settings = settings
        server: Server[Any] = Server(
            "taskyard", version="0.1.0", on_list_tools=self._list_tools, on_call_tool=self._call
        )
        self.manager = StreamableHTTPSessionManager(app=server, stateless=True)
        self.asgi = ClientIds(Cancellations(StreamableHTTPASGIApp(self.manager), self._cancelled))

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
        spec = _spec(params.name)
        if spec is None:
            return _error(
                f"no agent {params.name!r} is deployed here; tools/list names those that are"
            )
        refused = _refusal(arguments)
        if refused is not None:
            return _error(refused)
        record = await self._submit(request, spec, arguments)
        if isinstance(record, str):
            return _error(record)
        assert ctx.request_id is not None  # a request's
        call = McpCall(request, ctx.request_id)
        store, celery = await get_store(request), await get_celery(request)
        async with in_flight(store, celery, call, ctx.protocol_version, record):
            await self._follow(ctx, request, record)
        return await self._outcome(request, record.id)

    async def _submit(
        self, request: Request, spec: AgentSpec, arguments: dict[str, Any]
    ) -> TaskRecord | str:
        """Submit the task as `POST /v1/tasks` does (the agent's `if_session_busy` holds);
        the task, or why the session refused it."""
        store, celery = await get_store(request), await get_celery(request)
        body = TaskRequest(input=arguments["task"], session_id=arguments.get("session_id"),
                           agent=spec)  # fmt: skip
        record = body.record(request.state.tenant, body.session_id or uuid.uuid4().hex)
        created = await submit(store, celery, self.settings, record, body.busy_policy())
        if created.outcome == "busy":
            return f"session {record.session_id} is running task {created.task_id}: try later"
        return record

    async def _follow(
        self, ctx: ServerRequestContext[Any], request: Request, record: TaskRecord
    ) -> None:
        """Report the task's progress until it ends."""
        progress = _Progress(ctx)
        await progress.note(f"task {record.id} queued in session {record.session_id}")
        hub = await get_hub(request)
        async for batch in hub.follow(record.id):
            for _, fields in batch.entries:
                note = _note(fields["kind"], orjson.loads(fields["data"]))
                if note is not None:
                    await progress.note(note)

    async def _cancelled(self, request: Request, request_id: types.RequestId) -> None:
        """A handshake-era client's cancellation: it reaches the call's task wherever the
        call is served."""
        call = McpCall(request, request_id)
        await cancel_notified(await get_store(request), await get_celery(request), call)

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


def _refusal(arguments: dict[str, Any]) -> str | None:
    """Why the arguments cannot be a task (the caller's to fix), or None."""
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
