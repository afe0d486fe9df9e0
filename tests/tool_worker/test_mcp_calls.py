"""The tool worker's MCP jobs against an SDK server on loopback: a call's job gives the tool
result message, arguments that are no object are the model's to fix, and a cancel of the task
stops a remote call under way (the worker's interrupt, as for a session's cell)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from mcp_servers import ServedMcp, serve_mcp

from services.tool_worker.mcp_calls import McpCalls
from shared.agentkit.schema import ActionReturn, AgentMessage, ToolCall
from shared.agentkit.spec import McpServer
from shared.plumbing.settings import ToolWorkerSettings
from shared.runtime.jobs import ToolRunJob
from shared.sandbox import make_sandbox_provider


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


def test_an_interrupt_stops_a_remote_call_under_way(calls: McpCalls, served: ServedMcp) -> None:
    assert not calls.interrupt("acme:s")  # nothing runs yet
    answer: list[AgentMessage] = []
    running = threading.Thread(
        target=lambda: answer.append(calls.call(_job(served, "weather.slow", {"seconds": 20})))
    )
    running.start()
    deadline = time.monotonic() + 30
    while not calls.interrupt("acme:s"):  # until the call is under way
        assert time.monotonic() < deadline, "the call never started"
        time.sleep(0.05)
    running.join(30)
    assert not running.is_alive(), "the interrupted call did not end"
    assert _ret(answer[0]).errmsg == "the call was stopped: its task was cancelled"
