"""An MCP client's cancellation of a tool call, reaching the task the call started.

How a client cancels depends on the wire it speaks:

- 2026-07-28 on: it closes the call's response stream, and the SDK cancels the call's handler.
  `in_flight` then cancels the task, if the client has gone (a gateway that stops ends
  handlers too, and that is no client's cancel).
- The handshake era (2025-11-25 and before): it posts `notifications/cancelled` naming the
  call's request id, in a request of its own. The transport is stateless, so that request
  may reach another gateway process: `in_flight` keeps each such call's task in Redis under
  the tenant, the client and the request id, where `cancel_notified` finds it. A dropped
  connection is no cancellation on this wire (the spec's word): the task runs on.

The SDK's stateless transport serves each POST with a server of its own, which drops the
notification (no call is in flight there) and is ended as soon as it has answered, so
`Cancellations` acts on it before the SDK sees it. Request ids are the client's own (every
SDK client counts from 0), so the client is part of the key: `ClientIds` gives each
handshake-era client an `Mcp-Session-Id` at `initialize`, which it sends with every request
after. It names the client and holds nothing: any gateway process serves any of its
requests. A client that sends none shares the empty id.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
from celery import Celery
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp.types import RequestId
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from taskyard.plumbing import keys
from taskyard.runtime.cancel import cancel
from taskyard.runtime.store import TaskStore, redis_replies
from taskyard.runtime.task import TaskRecord

__all__ = ["Cancellations", "ClientIds", "McpCall", "cancel_notified", "in_flight"]

REASON = "cancelled by the MCP client"
# How long a call's entry outlives a gateway process killed mid-call (a call that ends
# removes its own): far past any task's deadline.
_KEPT_S = 86_400
# A cancellation that overtook its call (posted while the call was being submitted) leaves
# this in the call's place, for as long as a call can take to start.
_OVERTAKEN = "cancelled"
_OVERTAKEN_S = 60
_CANCELLED = b'"notifications/cancelled"'

OnCancelled = Callable[[Request, RequestId], Awaitable[None]]


def stream_is_the_call(protocol_version: str) -> bool:
    """Whether closing a call's stream cancels it (the 2026 wire on)."""
    return protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS


@dataclass(frozen=True, slots=True)
class McpCall:
    """A `tools/call`, as a handshake-era client's cancellation names it."""

    request: Request  # the HTTP request that carried the call (or the cancellation)
    request_id: RequestId

    @property
    def key(self) -> str:
        client = self.request.headers.get(MCP_SESSION_ID_HEADER, "")
        return keys.mcp_call(self.request.state.tenant, client, str(self.request_id))


@asynccontextmanager
async def in_flight(
    store: TaskStore, celery: Celery, call: McpCall, protocol_version: str, record: TaskRecord
) -> AsyncIterator[None]:
    """While the block follows `record`, the client's cancellation of `call` cancels it."""
    notified = not stream_is_the_call(protocol_version)
    if notified and await _swap(store, call.key, record.id, _KEPT_S) == _OVERTAKEN:
        await cancel(store, celery, record, REASON)
    try:
        yield
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            if not notified and await call.request.is_disconnected():
                await cancel(store, celery, record, REASON)
        raise
    finally:
        if notified:
            with anyio.CancelScope(shield=True):
                await store.r.delete(call.key)


async def cancel_notified(store: TaskStore, celery: Celery, call: McpCall) -> None:
    """Cancel the task of the call a `notifications/cancelled` names (a call not in flight
    yet is cancelled as it starts)."""
    task_id = await _swap(store, call.key, _OVERTAKEN, _OVERTAKEN_S)
    record = await store.get(task_id) if task_id and task_id != _OVERTAKEN else None
    if record is not None:
        await cancel(store, celery, record, REASON)


async def _swap(store: TaskStore, key: str, value: str, ttl_s: int) -> str | None:
    """Set `key` to `value`; what it held before."""
    earlier = await store.r.set(key, value, ex=ttl_s, get=True)
    assert not isinstance(earlier, bool)  # with GET, SET answers the value it replaced
    return redis_replies.text(earlier)


def _handshake_post(scope: Scope) -> Headers | None:
    """A handshake-era client's POST's headers (`initialize` names no version yet)."""
    if scope["type"] != "http" or scope["method"] != "POST":
        return None
    headers = Headers(scope=scope)
    version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
    return headers if version is None or not stream_is_the_call(version) else None


class Cancellations:
    """The SDK's ASGI app, with each handshake-era `notifications/cancelled` handed to
    `on_cancelled` before the SDK answers it."""

    def __init__(self, app: ASGIApp, on_cancelled: OnCancelled) -> None:
        self.app = app
        self.on_cancelled = on_cancelled

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if _handshake_post(scope) is None:
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        body = await request.body()
        request_id = _cancelled(body)
        if request_id is not None:
            await self.on_cancelled(request, request_id)
        await self.app(scope, _replaying(body, receive), send)


def _cancelled(body: bytes) -> RequestId | None:
    """The request id a `notifications/cancelled` names; None for any other message."""
    if _CANCELLED not in body:  # most bodies: not parsed twice
        return None
    try:
        message = json.loads(body)
    except ValueError:
        return None  # the SDK answers it
    if not isinstance(message, dict) or message.get("method") != "notifications/cancelled":
        return None
    params = message.get("params")
    return cancelled_request_id_from_params(params if isinstance(params, dict) else None)


def _replaying(body: bytes, receive: Receive) -> Receive:
    """`receive` with the body, already read, given again first."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


class ClientIds:
    """The SDK's ASGI app, with an `Mcp-Session-Id` for each handshake-era client that has
    none (it keeps the one from its `initialize`'s answer)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = _handshake_post(scope)
        if headers is None or MCP_SESSION_ID_HEADER in headers:
            await self.app(scope, receive, send)
            return
        issued = (MCP_SESSION_ID_HEADER.encode(), secrets.token_urlsafe(24).encode())

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), issued]}
            await send(message)

        await self.app(scope, receive, send_with_id)
