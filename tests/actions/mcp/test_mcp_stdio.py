"""A local MCP server inside a session's sandbox (the local backend here; the Docker one in
tests/e2e/test_mcp_tools.py): the SDK's client over stdio relayed through cells, and the
ways a server fails, each said in words the model reads."""

from __future__ import annotations

import pytest
from mcp_servers import STDIO_SERVER

from taskyard.agentkit.actions.mcp.client import McpClient, McpUnavailable
from taskyard.agentkit.schema import ActionStatusCode
from taskyard.agentkit.spec import McpServer
from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.sandbox import SandboxProvider

SESSION = "acme:stdio"
FILES = McpServer(name="files", command=["python3", "server.py"])


@pytest.fixture
def client(local_sandboxes: SandboxProvider) -> McpClient:
    sandbox = local_sandboxes.get(SESSION)
    sandbox.run(f"open('server.py', 'w').write({STDIO_SERVER!r})", 30)
    sandbox.run("open('notes.txt', 'w').write('one two three')", 30)
    return McpClient(ToolWorkerSettings(sandbox_backend="local", mcp_timeout_s=20), local_sandboxes)


async def test_a_local_server_is_listed_and_called_in_the_sandbox(client: McpClient) -> None:
    tools = await client.list_tools(FILES, "acme", SESSION)
    assert [tool.name for tool in tools] == ["wordcount"]
    ret = await client.call_tool(FILES, "wordcount", {"path": "notes.txt"}, "acme", SESSION)
    assert ret.result == [{"type": "text", "content": "notes.txt has 3 words"}]


async def test_a_server_that_ends_says_how(client: McpClient) -> None:
    dying = McpServer(
        name="dying",
        command=["python3", "-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)"],
    )
    ret = await client.call_tool(dying, "x", {}, "acme", SESSION)
    assert ret.state == ActionStatusCode.API_ERROR
    assert ret.errmsg == (
        "MCP server 'dying': the local server failed: it ended (exit status 3): boom"
    )


async def test_a_command_the_sandbox_lacks_is_said(client: McpClient) -> None:
    missing = McpServer(name="missing", command=["no-such-server"])
    with pytest.raises(McpUnavailable, match="MCP server 'missing': the local server failed"):
        await client.list_tools(missing, "acme", SESSION)


async def test_a_worker_without_sandboxes_serves_remote_servers_only() -> None:
    with pytest.raises(McpUnavailable, match="this worker runs no sandboxes"):
        await McpClient(ToolWorkerSettings()).list_tools(FILES, "acme", SESSION)
