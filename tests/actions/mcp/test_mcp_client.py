"""The tool worker's MCP client against a real server built with the `mcp` SDK, served over
streamable HTTP on loopback: listing, calls, results mapped to taskyard's, errors the model
reads, the guard (loopback refused unless allowed) and the tenant's credential."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mcp_servers import PNG_1X1, ServedMcp, serve_mcp
from pydantic import SecretStr

from taskyard.agentkit.actions.mcp.client import McpClient, McpUnavailable
from taskyard.agentkit.schema import ActionStatusCode
from taskyard.agentkit.spec import McpServer
from taskyard.plumbing.settings import ToolWorkerSettings

CREDENTIALS = SecretStr('{"acme": {"weather-key": "s3cret-token"}}')


@pytest.fixture(scope="module")
def served() -> Iterator[ServedMcp]:
    with serve_mcp() as server:
        yield server


def _allowed(**more: object) -> ToolWorkerSettings:
    return ToolWorkerSettings(
        mcp_allow_networks="127.0.0.1/32", mcp_credentials=CREDENTIALS, **more
    )


def _weather(served: ServedMcp, **more: object) -> McpServer:
    return McpServer(name="weather", url=served.url, **more)


async def test_lists_the_servers_tools_with_their_schemas(served: ServedMcp) -> None:
    tools = await McpClient(_allowed()).list_tools(_weather(served), "acme", "acme:s1")
    assert [tool.name for tool in tools] == ["forecast", "chart", "slow", "fail"]
    forecast = tools[0]
    assert forecast.description == "The weather tomorrow in a city."
    assert forecast.input_schema["properties"]["city"]["type"] == "string"
    assert forecast.input_schema["required"] == ["city"]


async def test_a_spec_may_keep_only_some_tools(served: ServedMcp) -> None:
    server = _weather(served, tools=["chart"])
    tools = await McpClient(_allowed()).list_tools(server, "acme", "acme:s1")
    assert [tool.name for tool in tools] == ["chart"]


async def test_a_call_returns_the_text(served: ServedMcp) -> None:
    ret = await McpClient(_allowed()).call_tool(
        _weather(served), "forecast", {"city": "Oslo"}, "acme", "acme:s1"
    )
    assert ret.errmsg is None and ret.state == ActionStatusCode.SUCCESS
    assert ret.type == "weather.forecast" and ret.args == {"city": "Oslo"}
    assert ret.result == [{"type": "text", "content": "Tomorrow in Oslo: sunny, 21 C"}]


async def test_an_image_becomes_an_artifact(served: ServedMcp) -> None:
    ret = await McpClient(_allowed()).call_tool(
        _weather(served), "chart", {"city": "Oslo"}, "acme", "acme:s1"
    )
    assert ret.artifacts is not None and len(ret.artifacts) == 1
    image = ret.artifacts[0]
    assert (image.mime, image.size, image.width, image.height) == ("image/png", len(PNG_1X1), 1, 1)
    assert ret.result == [{"type": "text", "content": image.describe()}]


async def test_a_tool_error_is_an_error_the_model_reads(served: ServedMcp) -> None:
    ret = await McpClient(_allowed()).call_tool(
        _weather(served), "fail", {"reason": "storm"}, "acme", "acme:s1"
    )
    assert ret.state == ActionStatusCode.API_ERROR
    assert ret.errmsg is not None and "no forecast: storm" in ret.errmsg


async def test_bad_arguments_are_an_error_the_model_reads(served: ServedMcp) -> None:
    ret = await McpClient(_allowed()).call_tool(
        _weather(served), "forecast", {"town": "Oslo"}, "acme", "acme:s1"
    )
    assert ret.state == ActionStatusCode.API_ERROR
    assert ret.errmsg is not None and "city" in ret.errmsg


async def test_loopback_is_refused_unless_the_settings_allow_it(served: ServedMcp) -> None:
    client = McpClient(ToolWorkerSettings())
    ret = await client.call_tool(_weather(served), "forecast", {"city": "Oslo"}, "acme", "acme:1")
    assert ret.state == ActionStatusCode.API_ERROR
    assert ret.errmsg == (
        "MCP server 'weather': refused to connect: 127.0.0.1 is a loopback address; "
        "only public addresses are opened"
    )
    with pytest.raises(McpUnavailable, match=r"127\.0\.0\.1 is a loopback address"):
        await client.list_tools(_weather(served), "acme", "acme:1")


async def test_the_tenants_credential_reaches_the_server_only(served: ServedMcp) -> None:
    server = _weather(served, credential="weather-key")
    before = len(served.authorizations)
    ret = await McpClient(_allowed()).call_tool(
        server, "forecast", {"city": "Bergen"}, "acme", "acme:s1"
    )
    assert ret.result == [{"type": "text", "content": "Tomorrow in Bergen: sunny, 21 C"}]
    assert served.authorizations[before:] == ["Bearer s3cret-token"]
    assert "s3cret-token" not in ret.model_dump_json()


async def test_a_tenant_without_the_credential_is_told(served: ServedMcp) -> None:
    server = _weather(served, credential="weather-key")
    ret = await McpClient(_allowed()).call_tool(server, "forecast", {"city": "X"}, "other", "o:1")
    assert ret.errmsg == (
        "MCP server 'weather': no credential 'weather-key' is configured for this tenant "
        "(TASKYARD_MCP_CREDENTIALS)"
    )


async def test_an_unknown_tool_is_an_error_the_model_reads(served: ServedMcp) -> None:
    ret = await McpClient(_allowed()).call_tool(_weather(served), "nowcast", {}, "acme", "acme:1")
    assert ret.state == ActionStatusCode.API_ERROR
    assert ret.errmsg is not None and "nowcast" in ret.errmsg


async def test_an_answer_past_the_size_cap_is_refused(served: ServedMcp) -> None:
    client = McpClient(_allowed(mcp_max_bytes=1024))
    with pytest.raises(McpUnavailable, match="passed 1024 bytes"):
        await client.list_tools(_weather(served), "acme", "acme:1")
