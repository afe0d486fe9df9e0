"""The tool worker's MCP client: lists a task's MCP server's tools and calls them, with the
`mcp` SDK's client over one of two transports.

- A remote server (`McpServer.url`): streamable HTTP through the web tool's request guard
  (`http.py`), each answer capped, with the tenant's credential as a bearer token when the
  server names one. The token comes from the settings here, in the tool worker, and goes into
  the request's header only: never into a job, a message, an event or a sandbox, and any
  echo of it in what the server answers is blanked before the model reads it.
- A local server (`McpServer.command`): stdio, run inside the session's sandbox (`stdio.py`).

Each listing or call is one connection, bounded by `mcp_timeout_s`. Every failure is said
in words: a call's as the `ActionReturn` error the model reads (so it can try otherwise), a
listing's as `McpUnavailable`.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import mcp.types as types
from mcp import Client, MCPError
from mcp.client import Transport
from mcp.client.streamable_http import streamable_http_client
from pydantic import ValidationError

from taskyard.agentkit.actions.mcp.http import AnswerTooLarge, guarded_client
from taskyard.agentkit.actions.mcp.listing import ListedTool
from taskyard.agentkit.actions.mcp.results import action_return
from taskyard.agentkit.actions.mcp.stdio import LocalServerFailed, SandboxStdio
from taskyard.agentkit.actions.web.addresses import AddressPolicy
from taskyard.agentkit.actions.web.errors import BlockedAddress
from taskyard.agentkit.actions.web.guard import Resolver
from taskyard.agentkit.schema import ActionReturn, ActionStatusCode
from taskyard.agentkit.spec import McpServer
from taskyard.errors import TaskyardError
from taskyard.plumbing.settings import McpSettings
from taskyard.sandbox import SandboxProvider

__all__ = ["ListedTool", "McpClient", "McpUnavailable"]

MAX_TOOLS = 128  # of one server offered to the model; the rest are left out
_MAX_PAGES = 20
_DESCRIPTION_CHARS = 4000
_REDACTED = "[credential]"


class McpUnavailable(TaskyardError):
    """A server that could not be reached, listed or called; the message says why."""


class McpClient:
    """Lists and calls the MCP servers of tasks, for any tenant and session. `sandboxes` runs
    local servers (a worker without them serves remote ones only); `resolver` and
    `ssl_context` are the guard's, for tests."""

    def __init__(
        self,
        settings: McpSettings,
        sandboxes: SandboxProvider | None = None,
        resolver: Resolver | None = None,
    ) -> None:
        self.settings = settings
        self.sandboxes = sandboxes
        self.resolver = resolver
        self.policy = AddressPolicy(settings.mcp_allow_private, settings.mcp_allow_networks)
        self._ssl: ssl.SSLContext | None = None  # made once: loading the CAs took ~40 ms a call

    async def list_tools(
        self, server: McpServer, tenant: str, session_key: str
    ) -> list[ListedTool]:
        """The server's tools (those its spec keeps), at most `MAX_TOOLS`; `McpUnavailable`
        says why there are none."""
        async with self._session(server, tenant, session_key) as (client, _):
            listed: list[types.Tool] = []
            cursor: str | None = None
            for _ in range(_MAX_PAGES):
                page = await client.list_tools(cursor=cursor)
                listed += page.tools
                cursor = page.next_cursor
                if cursor is None or len(listed) >= MAX_TOOLS:
                    break
        wanted = [t for t in listed if server.tools is None or t.name in server.tools]
        return [_listed(tool) for tool in wanted[:MAX_TOOLS]]

    async def call_tool(
        self,
        server: McpServer,
        tool: str,
        arguments: dict[str, Any],
        tenant: str,
        session_key: str,
    ) -> ActionReturn:
        """Call `tool` of the server; what went wrong comes back as the result's error."""
        call_name = f"{server.name}.{tool}"
        try:
            async with self._session(server, tenant, session_key) as (client, notes):
                result = await client.call_tool(tool, arguments)
        except McpUnavailable as exc:
            return ActionReturn(type=call_name, args=arguments, errmsg=str(exc),
                                state=ActionStatusCode.API_ERROR)  # fmt: skip
        ret = action_return(call_name, arguments, result, self.settings.mcp_max_chars)
        if notes:
            ret.result = [{"type": "text", "content": "\n".join(notes)}, *(ret.result or [])]
        return self._redacted(ret, server, tenant)

    @contextlib.asynccontextmanager
    async def _session(
        self, server: McpServer, tenant: str, session_key: str
    ) -> AsyncIterator[tuple[Client, list[str]]]:
        """An initialized client of the server, and the notes the model must read besides
        the result; every failure inside comes out as `McpUnavailable`."""
        timeout = self.settings.mcp_timeout_s
        seen = _Seen(self._stdio(server, session_key))
        try:
            with anyio.fail_after(timeout):
                async with contextlib.AsyncExitStack() as stack:
                    transport: Transport
                    if seen.stdio is not None:
                        transport = seen.stdio.open()
                    else:
                        http = await stack.enter_async_context(self._http(server, tenant, seen))
                        transport = streamable_http_client(
                            str(server.url), http_client=http,
                            max_sse_event_size=self.settings.mcp_max_bytes,
                        )  # fmt: skip
                    client = Client(transport, read_timeout_seconds=timeout, cache=None,
                                    client_info=_CLIENT)  # fmt: skip
                    await stack.enter_async_context(client)
                    yield client, seen.stdio.notes if seen.stdio is not None else []
        except McpUnavailable:
            raise
        except Exception as exc:  # every way a server, its transport or the SDK can fail
            why = f"MCP server {server.name!r}: {_reason(exc, seen, timeout)}"
            raise McpUnavailable(self._scrubbed(why, server, tenant)) from exc

    def _stdio(self, server: McpServer, session_key: str) -> SandboxStdio | None:
        if not server.local:
            return None
        if self.sandboxes is None:
            raise McpUnavailable(f"MCP server {server.name!r}: this worker runs no sandboxes")
        assert server.command is not None
        sandbox = self.sandboxes.get(session_key)
        return SandboxStdio(sandbox, server.command, self.settings.mcp_timeout_s)

    def _http(self, server: McpServer, tenant: str, seen: _Seen) -> httpx2.AsyncClient:
        headers = {}
        if server.credential is not None:
            headers["Authorization"] = f"Bearer {self._credential(server, tenant)}"
        if self._ssl is None:
            self._ssl = httpx2.create_ssl_context(trust_env=False)
        return guarded_client(self.policy, timeout_s=self.settings.mcp_timeout_s,
                              max_bytes=self.settings.mcp_max_bytes, headers=headers,
                              errors=seen.statuses, resolver=self.resolver,
                              ssl_context=self._ssl)  # fmt: skip

    def _credential(self, server: McpServer, tenant: str) -> str:
        assert server.credential is not None
        token = self.settings.mcp_credential(tenant, server.credential)
        if token is None:
            raise McpUnavailable(
                f"MCP server {server.name!r}: no credential {server.credential!r} is "
                f"configured for this tenant (TASKYARD_MCP_CREDENTIALS)"
            )
        return token

    def _scrubbed(self, text: str, server: McpServer, tenant: str) -> str:
        """`text` without the tenant's credential for the server, should it echo it."""
        if server.credential is None:
            return text
        token = self.settings.mcp_credential(tenant, server.credential)
        return text.replace(token, _REDACTED) if token else text

    def _redacted(self, ret: ActionReturn, server: McpServer, tenant: str) -> ActionReturn:
        if ret.errmsg:
            ret.errmsg = self._scrubbed(ret.errmsg, server, tenant)
        for part in ret.result or []:
            if isinstance(part.get("content"), str):
                part["content"] = self._scrubbed(part["content"], server, tenant)
        return ret


_CLIENT = types.Implementation(name="taskyard", version="0.1.0")


@dataclass
class _Seen:
    """What a connection saw that its exceptions do not say: the local server's failure, the
    HTTP error statuses a remote one answered."""

    stdio: SandboxStdio | None
    statuses: list[int] = field(default_factory=list)


def _listed(tool: types.Tool) -> ListedTool:
    description = (tool.description or tool.title or "")[:_DESCRIPTION_CHARS]
    return ListedTool(name=tool.name, description=description, input_schema=tool.input_schema)


def _reason(exc: BaseException, seen: _Seen, timeout_s: float) -> str:
    """The words for a failure: the most telling of the exceptions it holds, or of what the
    connection saw."""
    leaves = list(_leaves(exc))
    for kind in (BlockedAddress, AnswerTooLarge, McpUnavailable):
        found = next((e for e in leaves if isinstance(e, kind)), None)
        if found is not None:
            return str(found)
    if seen.stdio is not None and seen.stdio.failure is not None:
        return f"the local server failed: {seen.stdio.failure}"
    if seen.statuses:
        status = seen.statuses[-1]
        refused = " (the credential was refused, or is missing)" if status in (401, 403) else ""
        return f"it answered HTTP {status}{refused}"
    for leaf in leaves:
        if isinstance(leaf, MCPError):
            return f"it answered with an error: {leaf}"
        if isinstance(leaf, httpx2.TimeoutException | TimeoutError):
            return f"it did not answer within {timeout_s:g} s"
        if isinstance(leaf, httpx2.HTTPError):
            return f"it could not be reached: {leaf or type(leaf).__name__}"
        if isinstance(leaf, ValidationError):
            return "it answered what MCP does not allow"
        if isinstance(leaf, LocalServerFailed | OSError):
            return str(leaf)
    return f"it failed ({type(exc).__name__}: {exc})"


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    """The exceptions an exception group holds, however nested (or the exception itself)."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc
        if exc.__cause__ is not None:
            yield from _leaves(exc.__cause__)
