"""End to end: what `/mcp` offers on the default stack (no plugins), to the official `mcp` SDK's
client over streamable HTTP: the default agent (A2A's default card's) as a tool, a call that
runs a real task, and a client's cancellation reaching the task, on both wires: the 2026 one
(the client closes the call's stream) and the handshake era's (`notifications/cancelled`,
posted on its own, correlated by the client's session id and the call's request id)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import httpx2
import mcp.types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from devstack.stack import LocalStack

pytestmark = pytest.mark.e2e

DEFAULT = "taskyard"
_ENDED = {"succeeded", "failed", "cancelled", "timed_out"}
FOREVER = "```python\nimport time\ntime.sleep(600)\nprint('woke up')\n```"


@asynccontextmanager
async def _client(
    stack: LocalStack, mode: str = "auto", calls: list[Any] | None = None
) -> AsyncIterator[Client]:
    """The SDK's client of the stack's /mcp (`mode`: its wire); `calls` gets each tools/call's
    request id as it is posted."""
    seen = calls if calls is not None else []

    async def note(request: httpx2.Request) -> None:
        body = json.loads(request.content or b"{}")
        if isinstance(body, dict) and body.get("method") == "tools/call":
            seen.append(body["id"])

    headers = {"Authorization": f"Bearer {stack.api_key}"}
    async with httpx2.AsyncClient(
        headers=headers, timeout=60, event_hooks={"request": [note]}
    ) as http:
        transport = streamable_http_client(f"{stack.gateway_url}/mcp", http_client=http)
        async with Client(transport, mode=mode) as client:
            yield client


@asynccontextmanager
async def _rest(stack: LocalStack) -> AsyncIterator[httpx2.AsyncClient]:
    """The REST API, same tenant (async: the MCP client's tasks run while a test waits)."""
    headers = {"Authorization": f"Bearer {stack.api_key}"}
    async with httpx2.AsyncClient(base_url=stack.gateway_url, headers=headers) as http:
        yield http


async def _settled(rest: httpx2.AsyncClient, task_id: str) -> dict[str, Any]:
    """The task once it has ended; fail (not hang) after 30 s."""
    deadline = time.monotonic() + 30
    while True:
        task: dict[str, Any] = (await rest.get(f"/v1/tasks/{task_id}")).json()
        if task["status"] in _ENDED:
            return task
        assert time.monotonic() < deadline, task
        await anyio.sleep(0.1)


@dataclass
class _Running:
    """A call of the default agent whose cell sleeps, in flight."""

    task_id: str
    scope: anyio.CancelScope  # cancelling it abandons the call, as an MCP client's user would
    results: list[types.CallToolResult] = field(default_factory=list)


async def _running_call(client: Client, group: anyio.abc.TaskGroup, session: str) -> _Running:
    """Start the call; return once its task's cell runs."""
    notes: list[str] = []
    running = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        notes.append(message or "")
        if "calls IPythonInterpreter" in notes[-1]:
            running.set()

    call = _Running("", anyio.CancelScope())

    async def run() -> None:
        with call.scope:
            arguments = {"task": FOREVER, "session_id": session}
            call.results.append(
                await client.call_tool(DEFAULT, arguments, progress_callback=on_progress)
            )

    group.start_soon(run)
    with anyio.fail_after(60):
        await running.wait()
    call.task_id = notes[0].split()[1]  # "task <id> queued in session ..."
    return call


async def test_the_default_agent_is_a_tool_on_a_default_stack(stack: LocalStack) -> None:
    async with _client(stack) as client:
        listed = await client.list_tools()
    [tool] = listed.tools  # no plugins here: the default agent alone
    assert tool.name == DEFAULT
    assert tool.input_schema["required"] == ["task"]
    assert set(tool.input_schema["properties"]) == {"task", "session_id"}
    # The agent A2A's default card serves: the same name, the same description.
    card = httpx2.get(f"{stack.gateway_url}/.well-known/agent-card.json").json()
    assert card["name"] == tool.name
    assert tool.description is not None and card["description"].startswith("A tool-using agent")
    assert tool.description.startswith(card["description"].split(" Messages of one")[0])


async def test_a_call_of_the_default_agent_gets_the_models_answer(stack: LocalStack) -> None:
    async with _client(stack) as client:
        result = await client.call_tool(
            DEFAULT, {"task": "```python\nprint(6 * 7)\n```", "session_id": "mcp-d-answer"}
        )
    assert not result.is_error, result
    [text] = result.content
    assert isinstance(text, types.TextContent)
    assert text.text == "The result is: 42 (scripted model)"
    summary = result.structured_content
    assert summary is not None and summary["status"] == "succeeded"
    async with _rest(stack) as rest:
        task = (await rest.get(f"/v1/tasks/{summary['task_id']}")).json()
    assert (task["session_id"], task["result"]) == ("mcp-d-answer", text.text)


async def test_a_task_cancelled_elsewhere_ends_its_call_with_why(stack: LocalStack) -> None:
    async with _client(stack) as client, _rest(stack) as rest, anyio.create_task_group() as tg:
        call = await _running_call(client, tg, "mcp-d-elsewhere")
        (await rest.post(f"/v1/tasks/{call.task_id}/cancel")).raise_for_status()
    [result] = call.results
    assert result.is_error and isinstance(result.content[0], types.TextContent)
    assert result.content[0].text == "the task cancelled: cancelled by the client"
    assert result.structured_content is not None
    assert result.structured_content["status"] == "cancelled"


async def test_closing_the_calls_stream_cancels_its_task(stack: LocalStack) -> None:
    async with _client(stack) as client, _rest(stack) as rest, anyio.create_task_group() as tg:
        assert client.protocol_version == "2026-07-28"  # the wire where the stream is the call
        call = await _running_call(client, tg, "mcp-d-closed")
        call.scope.cancel()
        task = await _settled(rest, call.task_id)
    assert (task["status"], task["error"]) == ("cancelled", "cancelled by the MCP client")
    assert not call.results  # abandoned: the client took no answer


async def test_notifications_cancelled_cancels_that_clients_call_only(stack: LocalStack) -> None:
    calls_a: list[Any] = []
    calls_b: list[Any] = []
    async with (
        _client(stack, "legacy", calls_a) as a,
        _client(stack, "legacy", calls_b) as b,
        _rest(stack) as rest,
        anyio.create_task_group() as tg,
    ):
        assert a.protocol_version == b.protocol_version == "2025-11-25"
        first = await _running_call(a, tg, "mcp-d-legacy-a")
        second = await _running_call(b, tg, "mcp-d-legacy-b")
        # The same request id from each: only the client tells the calls apart.
        assert calls_a == calls_b and len(calls_a) == 1
        first.scope.cancel()  # the SDK posts notifications/cancelled for it
        task = await _settled(rest, first.task_id)
        assert (task["status"], task["error"]) == ("cancelled", "cancelled by the MCP client")
        assert (await rest.get(f"/v1/tasks/{second.task_id}")).json()["status"] != "cancelled"
        second.scope.cancel()
        assert (await _settled(rest, second.task_id))["status"] == "cancelled"
