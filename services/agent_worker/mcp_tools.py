"""The tools of a task's MCP servers, as the model is offered them.

The agent worker never connects to an MCP server: a remote one is reached by tool workers
only (through the web guard, with the tenant's credential), a local one runs in the session's
sandbox. So a step reads each server's listing kept in Redis, and where none is kept asks a
tool worker for one (`McpListJob`) and waits for its answer
(`taskyard.agentkit.actions.mcp.listing`). A server that cannot be listed ends the task with the
reason: the model would otherwise work without tools the spec promised it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from celery import Celery

from services.agent_worker.errors import AgentWorkerError
from taskyard.agentkit.actions.mcp.listing import (
    ListingExchange,
    McpListing,
    server_id,
    tool_schemas,
)
from taskyard.agentkit.spec import McpServer
from taskyard.plumbing.settings import AgentWorkerSettings
from taskyard.runtime.jobs import McpListJob, envelope
from taskyard.runtime.store import TaskStore
from taskyard.runtime.task import TaskRecord

__all__ = ["McpTools", "McpToolsUnavailable"]

_WAIT_MARGIN_S = 10.0  # beyond a listing's own bound: the job's queueing and the answer's trip


class McpToolsUnavailable(AgentWorkerError):
    """A server of the task's spec could not be listed; the message says which and why."""


class McpTools:
    """Lists a task's MCP servers through the tool workers, and keeps nothing itself."""

    def __init__(self, store: TaskStore, settings: AgentWorkerSettings, celery: Celery) -> None:
        self.listings = ListingExchange(store.r, settings.mcp_tools_ttl_s)
        self.store = store  # its pushes send a local server's listing where the server runs
        self.celery = celery
        self.wait_s = settings.mcp_timeout_s + _WAIT_MARGIN_S
        self._asked: dict[tuple[str, str, str], asyncio.Future[McpListing]] = {}

    async def schemas(self, record: TaskRecord) -> list[dict[str, Any]]:
        """The OpenAI ``tools`` entries of every MCP server the task's spec names."""
        entries: list[dict[str, Any]] = []
        for server in record.spec.mcp_servers:
            listing = await self._listing(record, server)
            if listing.error is not None:
                raise McpToolsUnavailable(f"MCP tools could not be listed: {listing.error}")
            entries += tool_schemas(server, listing.tools)
        return entries

    async def _listing(self, record: TaskRecord, server: McpServer) -> McpListing:
        kept = await self.listings.kept(record.tenant, record.session_id, server)
        if kept is not None:
            return kept
        # Steps of this process waiting for the same listing share one request: a burst of
        # new tasks then holds one Redis connection in a blocking pop, not one each.
        key = (record.tenant, record.session_id if server.local else "", server_id(server))
        asked = self._asked.get(key)
        if asked is None:
            asked = self._asked[key] = asyncio.ensure_future(self._ask(record, server))
            asked.add_done_callback(lambda _: self._asked.pop(key, None))
        return await asyncio.shield(asked)

    async def _ask(self, record: TaskRecord, server: McpServer) -> McpListing:
        job = McpListJob(tenant=record.tenant, session_id=record.session_id, server=server,
                         expires_at=time.time() + self.wait_s)  # fmt: skip
        await self.store.push([envelope(self.celery, job)])
        answer = await self.listings.wait(job.request_id, self.wait_s)
        if answer is None:
            why = f"no tool worker answered within {self.wait_s:g} s (is one on its queue?)"
            return McpListing(error=f"MCP server {server.name!r}: {why}")
        return answer
