"""End to end: taskyard as an MCP server. The official `mcp` SDK's client, over streamable HTTP,
against the gateway's `/mcp` of the local stack (every service a process) with plugins: each
deployed agent is a tool beside the default one; a call runs a real task (a tool call on a tool
worker included) and streams its progress; the tenant's API key is required."""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import mcp.types as types
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from devstack.stack import LocalStack
from taskyard.client import TaskyardClient

pytestmark = pytest.mark.e2e

PLUGINS = "examples.custom_agent,examples.custom_action,tests.plugins.composite_agents"
CALL = {
    "name": "UnitConverter.temperature",
    "arguments": {"value": 100, "from_unit": "C", "to_unit": "F"},
}
QUESTION = f"Boiling point in F?\n```tool\n{json.dumps(CALL)}\n```"
API_PAGE = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text()


@pytest.fixture(scope="module")
def stack(sandbox_image: str) -> Iterator[LocalStack]:
    stack = LocalStack(
        api_keys="key-a=tenant-a,key-b=tenant-b",
        extra_env={"TASKYARD_PLUGIN_MODULES": PLUGINS, "TASKYARD_SANDBOX_WARM_POOL": "0"},
        tool_queues=("tools.IPythonInterpreter", "tools.UnitConverter"),
    ).start()
    yield stack
    stack.stop()


@asynccontextmanager
async def _client(
    stack: LocalStack, key: str | None, statuses: list[int] | None = None
) -> AsyncIterator[Client]:
    """The SDK's client of the gateway's /mcp with `key`; `statuses` gets each HTTP status
    answered (the SDK's error does not say it)."""
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    seen = statuses if statuses is not None else []

    async def note(response: httpx2.Response) -> None:
        seen.append(response.status_code)

    hooks = {"response": [note]}
    async with httpx2.AsyncClient(headers=headers, timeout=60, event_hooks=hooks) as http:
        transport = streamable_http_client(f"{stack.gateway_url}/mcp", http_client=http)
        async with Client(transport) as client:
            yield client


async def test_each_deployed_agent_is_a_tool(stack: LocalStack) -> None:
    async with _client(stack, "key-a") as client:
        listed = await client.list_tools()
    tools = {tool.name: tool for tool in listed.tools}
    # The default agent first (test_mcp_default.py: on every stack), the plugins' beside it.
    assert list(tools) == ["taskyard", "pipeline_pair", "unit_expert", "writer_critic"]
    expert = tools["unit_expert"]
    assert expert.description is not None
    assert expert.description.startswith("Answers unit questions with the UnitConverter tool")
    assert expert.input_schema["required"] == ["task"]
    assert set(expert.input_schema["properties"]) == {"task", "session_id"}


async def test_a_call_runs_a_task_and_streams_its_progress(stack: LocalStack) -> None:
    progress: list[tuple[float, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, message))

    async with _client(stack, "key-a") as client:
        result = await client.call_tool(
            "unit_expert", {"task": QUESTION, "session_id": "mcp-e1"}, progress_callback=on_progress
        )
    assert not result.is_error, result
    [text] = result.content
    assert isinstance(text, types.TextContent)
    assert "212 F" in text.text and text.text.endswith("(checked by unit_expert)")
    summary = result.structured_content
    assert summary is not None
    assert (summary["status"], summary["session_id"]) == ("succeeded", "mcp-e1")
    assert summary["result"] == text.text

    # Progress came in order, from the task's own events.
    messages = [message for _, message in progress]
    assert [done for done, _ in progress] == list(range(1, len(progress) + 1))
    assert messages[0] == f"task {summary['task_id']} queued in session mcp-e1"
    assert "unit_expert calls UnitConverter.temperature" in messages
    assert "UnitConverter.temperature returned" in messages
    assert messages[-1] == "status succeeded"

    # It is a task of the key's tenant like any other.
    with TaskyardClient(stack.gateway_url, "key-a") as rest:
        task = rest.get(summary["task_id"])
    assert task["status"] == "succeeded" and task["result"] == text.text
    with TaskyardClient(stack.gateway_url, "key-b") as other:
        assert other.http.get(f"/v1/tasks/{summary['task_id']}").status_code == 404


async def test_a_call_the_agent_cannot_take_is_a_tool_error(stack: LocalStack) -> None:
    async with _client(stack, "key-a") as client:
        unknown = await client.call_tool("nobody", {"task": "hi"})
        empty = await client.call_tool("unit_expert", {"task": "  "})
    assert unknown.is_error and empty.is_error
    assert isinstance(unknown.content[0], types.TextContent)
    assert unknown.content[0].text == (
        "no agent 'nobody' is deployed here; tools/list names those that are"
    )


@pytest.mark.parametrize("key", [None, "wrong-key"])
async def test_a_missing_or_wrong_key_is_refused(stack: LocalStack, key: str | None) -> None:
    statuses: list[int] = []
    with pytest.raises(ExceptionGroup) as refused:
        async with _client(stack, key, statuses) as client:
            await client.list_tools()
    assert refused.group_contains(MCPError)
    assert statuses and set(statuses) == {401}  # every request refused, none served
    # The same refusal, over plain HTTP.
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    answer = httpx2.post(f"{stack.gateway_url}/mcp", json=body, headers=headers)
    assert answer.status_code == 401
    assert answer.json()["detail"].startswith("missing or invalid API key")


async def test_the_api_pages_sdk_example(stack: LocalStack) -> None:
    section = API_PAGE.split("\n### taskyard as an MCP server\n", 1)[1]
    [example] = re.findall(r"```python\n(.*?)```", section.split("\n## ", 1)[0], re.DOTALL)
    example = example.replace("http://127.0.0.1:8000", stack.gateway_url)
    example = example.replace("Bearer dev-key", "Bearer key-a")  # this stack's key
    namespace: dict[str, object] = {"__name__": "api_page"}
    exec(compile(example, "docs/api.md", "exec"), namespace)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        await namespace["ask"]()  # type: ignore[operator]
    lines = printed.getvalue().splitlines()
    assert lines[0] == "['taskyard', 'pipeline_pair', 'unit_expert', 'writer_critic']"
    assert lines[1].startswith("task task_") and lines[-2] == "status succeeded"
    assert lines[-1].endswith("(checked by unit_expert)")
