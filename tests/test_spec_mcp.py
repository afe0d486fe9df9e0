"""`AgentSpec.mcp_servers`: what a task may name as MCP servers, and what it is refused."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from taskyard.agentkit.spec import AgentSpec


def _spec(*servers: dict[str, Any]) -> AgentSpec:
    return AgentSpec.model_validate({"mcp_servers": list(servers)})


def test_a_remote_and_a_local_server() -> None:
    spec = _spec(
        {"name": "weather", "url": "https://mcp.example.com/mcp", "credential": "weather-key"},
        {"name": "files", "command": ["python3", "server.py"], "tools": ["wordcount"]},
    )
    remote, local = spec.mcp_servers
    assert not remote.local and local.local
    assert spec.mcp_server_for("weather.forecast") == remote
    assert spec.mcp_server_for("files.wordcount") == local
    assert spec.mcp_server_for("weather") is None and spec.mcp_server_for("other.x") is None


@pytest.mark.parametrize(
    ("server", "why"),
    [
        ({"name": "w"}, r"a url \(remote\) or a command \(local\), not both"),
        ({"name": "w", "url": "https://x.example/mcp", "command": ["x"]}, "not both"),
        ({"name": "w", "url": "file:///etc/passwd"}, "http:// or https://"),
        ({"name": "w", "command": ["x"], "credential": "k"}, "a credential is for a remote"),
        ({"name": "we.ather", "url": "https://x.example/mcp"}, "should match pattern"),
        ({"name": "w", "url": "https://x.example/mcp", "secret": "s"}, "Extra inputs"),
    ],
)
def test_a_server_that_cannot_be_reached_as_written_is_refused(
    server: dict[str, Any], why: str
) -> None:
    with pytest.raises(ValidationError, match=why):
        _spec(server)


def test_two_servers_of_one_name_are_refused() -> None:
    server = {"name": "w", "url": "https://x.example/mcp"}
    with pytest.raises(ValidationError, match="a name of its own"):
        _spec(server, server)


def test_a_server_named_as_one_of_the_specs_tools_is_refused() -> None:
    server = {"name": "WebBrowser", "command": ["x"]}
    spec = {"tools": ["WebBrowser.search"], "mcp_servers": [server]}
    with pytest.raises(ValidationError, match=r"named as one of the spec's tools \(WebBrowser\)"):
        AgentSpec.model_validate(spec)
