"""End to end: a task's agent calls the tools of two MCP servers named in its spec, through the
gateway, the agent worker and the tool worker, every service a process, the scripted model
making the calls the user's message spells out.

- a remote server built with the official `mcp` SDK, served over streamable HTTP on loopback
  by this test; the tool worker may reach 127.0.0.1 only because the stack's settings allow
  that one address, and adds the tenant's credential, which the task never shows;
- a local stdio server, a script uploaded to the session and run inside the session's Docker
  sandbox (whose image has no `mcp` package: the script speaks the protocol's JSON-RPC with the
  standard library; the client is still the SDK's, in the tool worker).

A server on 127.0.0.2, which the settings do not allow, is refused by the same guard. The
dashboard (Debian's chromium, driven by Playwright) draws MCP calls as any tool's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from e2e_support import wait_status
from mcp_servers import STDIO_SERVER, ServedMcp, serve_mcp
from playwright.sync_api import expect, sync_playwright
from test_dashboard import CHROMIUM, CHROMIUM_ARGS, WAIT_MS

from devstack.stack import LocalStack
from taskyard.client import TaskyardClient

pytestmark = pytest.mark.e2e

TOKEN = "s3cret-token-of-acme"
NOTES = "the quick brown fox jumps over the lazy dog"


@pytest.fixture(scope="module")
def weather() -> Iterator[ServedMcp]:
    with serve_mcp("127.0.0.1") as served:
        yield served


@pytest.fixture(scope="module")
def forbidden() -> Iterator[ServedMcp]:
    """A server on another loopback address, which the settings do not allow."""
    with serve_mcp("127.0.0.2") as served:
        yield served


@pytest.fixture(scope="module")
def stack(sandbox_image: str) -> Iterator[LocalStack]:
    env = {
        "TASKYARD_MCP_ALLOW_NETWORKS": "127.0.0.1/32",  # the test's server, and nothing else
        "TASKYARD_MCP_CREDENTIALS": json.dumps({"acme": {"weather-key": TOKEN}}),
    }
    stack = LocalStack(api_keys="key-acme=acme", extra_env=env).start()
    yield stack
    stack.stop()


def _spec(weather: ServedMcp, **more: Any) -> dict[str, Any]:
    servers = [
        {"name": "weather", "url": weather.url, "credential": "weather-key"},
        {"name": "files", "command": ["python3", "server.py"]},
    ]
    return {"tools": [], "mcp_servers": servers, "max_steps": 6, **more}


def _fences(*calls: tuple[str, dict[str, Any]]) -> str:
    return "\n".join(
        f"```tool\n{json.dumps({'name': name, 'arguments': args})}\n```" for name, args in calls
    )


def _tool_messages(task: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (m["sender"], m["content"])
        for m in task["messages"]
        if isinstance(m["content"], dict) and m["content"].get("object") == "action_return"
    ]


def _text(ret: dict[str, Any]) -> str:
    texts = [part["content"] for part in ret["result"] or [] if part["type"] == "text"]
    return ret["errmsg"] or "\n".join(texts)


def test_a_task_calls_a_remote_and_a_local_mcp_server(
    client: TaskyardClient, weather: ServedMcp
) -> None:
    client.upload("mcp-1", STDIO_SERVER.encode(), "server.py")
    client.upload("mcp-1", NOTES.encode(), "notes.txt")
    text = "Forecast, chart and count.\n" + _fences(
        ("weather.forecast", {"city": "Oslo"}),
        ("weather.chart", {"city": "Oslo"}),
        ("files.wordcount", {"path": "notes.txt"}),
    )
    before = len(weather.authorizations)
    task = wait_status(client, client.submit(text, session_id="mcp-1", agent=_spec(weather))["id"])
    assert task["status"] == "succeeded", task

    outputs = _tool_messages(task)
    assert [sender for sender, _ in outputs] == [
        "weather.forecast", "weather.chart", "files.wordcount",
    ]  # fmt: skip
    (_, forecast), (_, chart), (_, counted) = outputs
    assert _text(forecast) == "Tomorrow in Oslo: sunny, 21 C"
    assert _text(chart).startswith("[image: image-") and chart["errmsg"] is None
    assert _text(chart).endswith(".png, 1\u00d71]")
    assert _text(counted) == "notes.txt has 9 words"
    assert task["result"] == "The result is: notes.txt has 9 words (scripted model)"

    # The chart is one of the task's artifacts, as a figure of a cell would be.
    artifacts = client.artifacts(task["id"])
    assert [(a["mime"], a["width"], a["height"]) for a in artifacts] == [("image/png", 1, 1)]

    # The credential reached the server, and nothing of the task shows it.
    assert weather.authorizations[before:] == [f"Bearer {TOKEN}"]
    assert TOKEN not in json.dumps(task)
    events = list(client.events(task["id"]))
    assert TOKEN not in json.dumps([e.data for e in events])

    # The event stream (what the dashboard's transcript draws) has each call and its output.
    shown = [e.data for e in events if e.kind == "message"]
    calls = [c["name"] for m in shown for c in (m.get("formatted") or {}).get("tool_calls", [])]
    assert calls == ["weather.forecast", "weather.chart", "files.wordcount"]
    outputs_shown = [m["sender"] for m in shown if isinstance(m["content"], dict)]
    assert outputs_shown == ["weather.forecast", "weather.chart", "files.wordcount"]


def test_the_model_reads_an_mcp_tools_error_and_answers(
    client: TaskyardClient, weather: ServedMcp
) -> None:
    client.upload("mcp-2", STDIO_SERVER.encode(), "server.py")
    text = _fences(("weather.fail", {"reason": "storm"}), ("files.wordcount", {"path": "gone.txt"}))
    task = wait_status(client, client.submit(text, session_id="mcp-2", agent=_spec(weather))["id"])
    assert task["status"] == "succeeded", task
    (_, failed), (_, missing) = _tool_messages(task)
    assert failed["errmsg"] == "Error executing tool fail: no forecast: storm"
    assert missing["errmsg"] == "cannot read gone.txt: No such file or directory"
    # The model read the error (the scripted one quotes what it read last).
    assert task["result"] == (
        "The result is: cannot read gone.txt: No such file or directory (scripted model)"
    )


def test_a_server_at_an_address_not_allowed_is_refused(
    client: TaskyardClient, forbidden: ServedMcp
) -> None:
    spec = {"tools": [], "mcp_servers": [{"name": "weather", "url": forbidden.url}]}
    text = _fences(("weather.forecast", {"city": "Oslo"}))
    task = wait_status(client, client.submit(text, session_id="mcp-3", agent=spec)["id"])
    assert task["status"] == "failed", task
    assert task["error"] == (
        "MCP tools could not be listed: MCP server 'weather': refused to connect: 127.0.0.2 "
        "is a loopback address; only public addresses are opened"
    )
    assert forbidden.authorizations == []


def test_a_servers_tools_are_listed_once_for_the_tenants_tasks(
    client: TaskyardClient, weather: ServedMcp
) -> None:
    # A spec keeping one tool is a listing of its own: no earlier test listed it.
    spec = {"tools": [], "mcp_servers": [{"name": "w", "url": weather.url, "tools": ["forecast"]}]}
    text = _fences(("w.forecast", {"city": "Rome"}))
    before = len(weather.methods)
    for session in ("mcp-4a", "mcp-4b"):
        task = wait_status(client, client.submit(text, session_id=session, agent=spec)["id"])
        assert task["status"] == "succeeded", task
        assert task["result"] == "The result is: Tomorrow in Rome: sunny, 21 C (scripted model)"
    methods = weather.methods[before:]
    # The SDK's client lists the tools once more after each call, on the call's connection, to
    # check the result against the tool's output schema; the listing the model is offered is
    # the one more, made for the first task only.
    assert methods.count("tools/call") == 2
    assert methods.count("tools/list") == 2 + 1


def test_the_dashboards_transcript_shows_mcp_calls_as_any_tools(
    client: TaskyardClient, weather: ServedMcp, stack: LocalStack, tmp_path: Any
) -> None:
    client.upload("mcp-5", STDIO_SERVER.encode(), "server.py")
    client.upload("mcp-5", NOTES.encode(), "notes.txt")
    text = _fences(
        ("weather.forecast", {"city": "Lima"}), ("files.wordcount", {"path": "notes.txt"})
    )
    task_id = client.submit(text, session_id="mcp-5", agent=_spec(weather))["id"]
    assert wait_status(client, task_id)["status"] == "succeeded"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            str(tmp_path), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        try:
            page = browser.new_page()
            page.goto(f"{stack.gateway_url}/ui/")
            page.fill("#api-key", stack.api_key)
            page.click("#sign-in button")
            page.locator(f'#tasks tr[data-task-id="{task_id}"]').click(timeout=WAIT_MS)
            transcript = page.locator("#transcript")
            expect(transcript).to_have_attribute("data-final", "succeeded", timeout=WAIT_MS)
            calls = transcript.locator(".msg.tool-call .sender")
            expect(calls).to_have_text(
                ["assistant calls weather.forecast", "assistant calls files.wordcount"]
            )
            outputs = transcript.locator(".msg.tool-output")
            expect(outputs.locator(".sender")).to_have_text(
                ["weather.forecast output", "files.wordcount output"]
            )
            expect(outputs.locator("pre")).to_have_text(
                ["Tomorrow in Lima: sunny, 21 C", "notes.txt has 9 words"]
            )
        finally:
            browser.close()
