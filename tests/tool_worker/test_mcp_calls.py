"""The tool worker's MCP jobs against an SDK server on loopback: a call's job gives the tool
result message, arguments that are no object are the model's to fix, and a cancel of the task
stops a remote call under way (the worker's interrupt, as for a session's cell)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator

import pytest
from mcp_servers import ServedMcp, serve_mcp

from services.tool_worker.mcp_calls import McpCalls
from taskyard.agentkit.schema import ActionReturn, AgentMessage, ToolCall
from taskyard.agentkit.spec import McpServer
from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.runtime.jobs import ToolRunJob
from taskyard.sandbox import make_sandbox_provider


@pytest.fixture(scope="module")
def served() -> Iterator[ServedMcp]:
    with serve_mcp() as server:
        yield server


@pytest.fixture
def calls() -> Iterator[McpCalls]:
    settings = ToolWorkerSettings(mcp_allow_networks="127.0.0.1/32", sandbox_backend="local")
    sandboxes = make_sandbox_provider(settings)  # no sandbox starts: remote calls only
    yield McpCalls(settings, sandboxes)
    sandboxes.close_all()


def _job(served: ServedMcp, name: str, parameters: dict | str) -> ToolRunJob:
    call = ToolCall(id="c1", name=name, parameters=parameters)
    server = McpServer(name="weather", url=served.url)
    return ToolRunJob(task_id="t1", step=1, tenant="acme", session_id="s", call=call, mcp=server)


def _ret(message: AgentMessage) -> ActionReturn:
    assert isinstance(message.content, ActionReturn)
    return message.content


def test_a_call_job_gives_the_tool_result_message(calls: McpCalls, served: ServedMcp) -> None:
    message = calls.call(_job(served, "weather.forecast", {"city": "Oslo"}))
    assert message.sender == "weather.forecast" and message.tool_call_id == "c1"
    assert _ret(message).result == [{"type": "text", "content": "Tomorrow in Oslo: sunny, 21 C"}]


def test_arguments_that_are_no_object_are_the_models_to_fix(
    calls: McpCalls, served: ServedMcp
) -> None:
    ret = _ret(calls.call(_job(served, "weather.forecast", "Oslo")))
    assert ret.errmsg == "the arguments must be a JSON object"


def _interrupted(calls: McpCalls, served: ServedMcp, after_s: float) -> ActionReturn:
    """The result of a slow call interrupted `after_s` after it was under way."""
    answer: list[AgentMessage] = []
    running = threading.Thread(
        target=lambda: answer.append(calls.call(_job(served, "weather.slow", {"seconds": 20})))
    )
    running.start()
    deadline = time.monotonic() + 30
    while "acme:s" not in calls._running:
        assert time.monotonic() < deadline, "the call never started"
        time.sleep(0.001)
    time.sleep(after_s)
    assert calls.interrupt("acme:s")
    running.join(30)
    assert not running.is_alive(), "the interrupted call did not end"
    return _ret(answer[0])


@pytest.mark.parametrize("after_ms", [0, 2, 5, 10, 25, 50])
def test_an_interrupt_at_any_moment_of_the_call_says_so(
    calls: McpCalls, served: ServedMcp, after_ms: int
) -> None:
    """Connecting, initializing, or waiting on the tool: the model reads the same words."""
    ret = _interrupted(calls, served, after_ms / 1000)
    assert not calls.interrupt("acme:s")  # nothing runs any more
    assert ret.errmsg == "the call was stopped: its task was cancelled"


def test_a_cancel_the_sdk_reports_as_its_own_failure_still_says_stopped(
    calls: McpCalls, served: ServedMcp, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under load the SDK can turn the cancel into a task group's error (a stream closed
    under one of its tasks), which the client reports as the server's failure; seen in CI."""

    async def sdk_race(*args: object) -> ActionReturn:
        try:
            await asyncio.sleep(20)
        except asyncio.CancelledError:
            failed = "MCP server 'weather': it failed (ExceptionGroup: unhandled errors ...)"
            return ActionReturn(type="weather.slow", errmsg=failed)
        raise AssertionError("not interrupted")

    monkeypatch.setattr(calls.client, "call_tool", sdk_race)
    ret = _interrupted(calls, served, 0.01)
    assert ret.errmsg == "the call was stopped: its task was cancelled"


def test_an_answer_that_beats_the_interrupt_is_refused(
    calls: McpCalls, served: ServedMcp, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def answers_anyway(*args: object) -> ActionReturn:
        with contextlib.suppress(asyncio.CancelledError):  # the answer came with the cancel
            await asyncio.sleep(20)
        return ActionReturn(type="weather.slow", result=[{"type": "text", "content": "sunny"}])

    monkeypatch.setattr(calls.client, "call_tool", answers_anyway)
    ret = _interrupted(calls, served, 0.01)
    assert ret.errmsg == "the call was stopped: its task was cancelled" and not ret.result
