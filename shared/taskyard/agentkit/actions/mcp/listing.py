"""An MCP server's tool listing between the tool worker that lists it and the agent worker
that offers its tools to the model, over Redis (the only thing both reach).

The agent worker reads the listing kept for (tenant, server); when none is kept, it sends a
`McpListJob` and waits on the request's reply list, as the gateway waits for a session's
files. The tool worker answers there and keeps a good listing `mcp_tools_ttl_s`, so a remote
server is listed once per tenant in that time, whatever the worker and the session. A local
server runs from the session's own files, so its listing is kept per session. A failed
listing is not kept: the next step asks again.
"""

from __future__ import annotations

import hashlib
from typing import Any

import redis.asyncio as aioredis
from pydantic import BaseModel, ConfigDict

from taskyard.agentkit.spec import McpServer
from taskyard.plumbing import keys

__all__ = ["ListedTool", "ListingExchange", "McpListing", "server_id", "tool_schemas"]

_REPLY_TTL_S = 60  # an answer nobody took


class ListedTool(BaseModel):
    """One tool of a server, as its listing gave it (the model's schema is built from it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = ""
    input_schema: dict[str, Any]


class McpListing(BaseModel):
    """A listing's outcome: the tools, or why there are none (`error`, in words)."""

    model_config = ConfigDict(extra="forbid")

    tools: list[ListedTool] = []
    error: str | None = None


def server_id(server: McpServer) -> str:
    """How the server is reached and what of it is kept, as a short hash (its name is not
    part: renaming a server in a spec lists nothing again)."""
    reached = server.model_dump_json(exclude={"name"})
    return hashlib.sha256(reached.encode()).hexdigest()[:24]


def tool_schemas(server: McpServer, tools: list[ListedTool]) -> list[dict[str, Any]]:
    """OpenAI ``tools`` entries for a server's tools, each named "<server>.<tool>"."""
    return [
        {
            "type": "function",
            "function": {
                "name": f"{server.name}.{tool.name}",
                "description": tool.description,
                "parameters": tool.input_schema or {"type": "object", "properties": {}},
            },
        }
        for tool in tools
    ]


def _kept_key(tenant: str, session_id: str, server: McpServer) -> str:
    return keys.mcp_listing(tenant, server_id(server), session_id if server.local else None)


class ListingExchange:
    """Both ends of a listing request, on a Redis client that decodes responses."""

    def __init__(self, client: aioredis.Redis, ttl_s: int) -> None:
        self.r = client
        self.ttl_s = ttl_s

    # -- the agent worker's end -------------------------------------------------------------

    async def kept(self, tenant: str, session_id: str, server: McpServer) -> McpListing | None:
        """The listing kept for the tenant's server (a local one's: for the session), if any."""
        text = await self.r.get(_kept_key(tenant, session_id, server))
        return None if text is None else McpListing.model_validate_json(text)

    async def wait(self, request_id: str, timeout: float) -> McpListing | None:
        """The answer to a request, or None if none came within `timeout` seconds."""
        popped = await self.r.blpop([keys.mcp_listing_reply(request_id)], timeout=timeout)
        return None if popped is None else McpListing.model_validate_json(popped[1])

    # -- the tool worker's end --------------------------------------------------------------

    async def answer(
        self, request_id: str, tenant: str, session_id: str, server: McpServer, listing: McpListing
    ) -> None:
        """Answer the request; a good listing is kept for the next steps too."""
        text, reply = listing.model_dump_json(), keys.mcp_listing_reply(request_id)
        async with self.r.pipeline(transaction=True) as pipe:
            if listing.error is None:
                pipe.set(_kept_key(tenant, session_id, server), text, ex=self.ttl_s)
            pipe.rpush(reply, text)
            pipe.expire(reply, _REPLY_TTL_S)
            await pipe.execute()
