"""MCP servers for the tests: one built with the official `mcp` SDK (`MCPServer`), served over
streamable HTTP on loopback by a thread of the test process, and the source of a small stdio
server (standard library only) that a test writes into a session's sandbox, whose image has
no `mcp` package."""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import anyio
import uvicorn
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["PNG_1X1", "STDIO_SERVER", "ServedMcp", "serve_mcp"]

# A 1x1 transparent PNG: the image a tool answers with.
PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)


@dataclass
class ServedMcp:
    """A running SDK server: its endpoint, the Authorization headers its `forecast` calls
    carried, and the JSON-RPC method of every request it was sent."""

    url: str
    authorizations: list[str | None] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)


def _recording(app: ASGIApp, seen: ServedMcp) -> ASGIApp:
    """`app`, noting each POSTed JSON-RPC message's method before it serves the request."""

    async def record(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        received = [await receive()]
        while received[-1].get("more_body"):
            received.append(await receive())
        body = b"".join(m.get("body", b"") for m in received)
        with contextlib.suppress(ValueError, AttributeError):
            seen.methods.append(json.loads(body)["method"])

        async def replay() -> Message:
            return received.pop(0) if received else await receive()

        await app(scope, replay, send)

    return record


def _server(seen: ServedMcp) -> MCPServer:
    server = MCPServer("weather")

    @server.tool()
    def forecast(city: str, ctx: Context) -> str:
        """The weather tomorrow in a city."""
        seen.authorizations.append(_authorization(ctx))
        return f"Tomorrow in {city}: sunny, 21 C"

    @server.tool()
    def chart(city: str) -> Image:
        """A chart of the week's temperatures in a city."""
        return Image(data=PNG_1X1, format="png")

    @server.tool()
    async def slow(seconds: float) -> str:
        """Answers after a while."""
        await anyio.sleep(seconds)
        return f"slept {seconds} s"

    @server.tool()
    def fail(reason: str) -> str:
        """Always fails, saying why."""
        raise ToolError(f"no forecast: {reason}")

    return server


def _authorization(ctx: Context) -> str | None:
    headers = ctx.headers
    return None if headers is None else headers.get("authorization")


@contextlib.contextmanager
def serve_mcp(host: str = "127.0.0.1") -> Iterator[ServedMcp]:
    """The weather server on `host` (a free port) until the block ends."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        port = probe.getsockname()[1]
    served = ServedMcp(f"http://{host}:{port}/mcp")
    app = _server(served).streamable_http_app(host=host, stateless_http=True, json_response=True)
    config = uvicorn.Config(
        _recording(app, served),
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=1,  # a slow tool's call a test cut short ends with the test
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="mcp-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the MCP test server did not start")
        time.sleep(0.02)
    try:
        yield served
    finally:
        server.should_exit = True
        thread.join(10)


# A stdio MCP server: newline-delimited JSON-RPC on stdin/stdout, as the spec's stdio transport
# says; one tool, `wordcount`, that counts the words of a file in the session's directory.
STDIO_SERVER = r"""
import json, sys

TOOLS = [{
    "name": "wordcount",
    "description": "Count the words of a file in the working directory.",
    "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}},
                    "required": ["path"]},
}]

def answer(request):
    method, params = request["method"], request.get("params") or {}
    if method == "initialize":
        return {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "files", "version": "1"}}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        path = params["arguments"]["path"]
        try:
            with open(path) as file:
                words = len(file.read().split())
        except OSError as exc:
            return {"content": [{"type": "text", "text": f"cannot read {path}: {exc.strerror}"}],
                    "isError": True}
        return {"content": [{"type": "text", "text": f"{path} has {words} words"}]}
    if method == "ping":
        return {}
    raise KeyError(method)

for line in sys.stdin:
    request = json.loads(line)
    if "id" not in request:
        continue  # a notification
    try:
        reply = {"jsonrpc": "2.0", "id": request["id"], "result": answer(request)}
    except KeyError as exc:
        reply = {"jsonrpc": "2.0", "id": request["id"],
                 "error": {"code": -32601, "message": f"unknown method {exc}"}}
    print(json.dumps(reply), flush=True)
"""
