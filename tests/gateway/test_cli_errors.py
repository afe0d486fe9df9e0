"""Every `taskyard` error is one line with the gateway's reason and an exit code of its own;
never a traceback. Against the gateway as a process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from gateway_support import GatewayProcess

from devstack.procs import free_port
from taskyard.client import GatewayUnreachable, InvalidRequest, NotFound, Unauthorized
from taskyard.client.cli import EXIT_CODES


@pytest.fixture(scope="module")
def gateway(redis_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with GatewayProcess(redis_server, tmp_path_factory.mktemp("gw") / "gateway.log") as url:
        yield url


def _taskyard(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "taskyard.client.cli", *args],
        capture_output=True, text=True, timeout=30, env={**os.environ, **env},
    )  # fmt: skip


def _one_line(result: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("taskyard: ")
    return line


def test_unknown_key(gateway: str) -> None:
    result = _taskyard("--gateway", gateway, "--api-key", "nope", "tasks")
    assert result.returncode == EXIT_CODES[Unauthorized] == 3
    assert "missing or invalid API key" in _one_line(result)


def test_unknown_task(gateway: str) -> None:
    result = _taskyard("get", "task_" + "0" * 32, TASKYARD_URL=gateway, TASKYARD_API_KEY="key-a")
    assert result.returncode == EXIT_CODES[NotFound] == 4
    assert _one_line(result) == "taskyard: no such task"


def test_invalid_input(gateway: str) -> None:
    result = _taskyard("--gateway", gateway, "--api-key", "key-a", "submit", "")
    assert result.returncode == EXIT_CODES[InvalidRequest] == 5
    assert "body.input: String should have at least 1 character" in _one_line(result)


def test_unreachable_gateway() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    result = _taskyard("--gateway", url, "follow", "task_" + "0" * 32)
    assert result.returncode == EXIT_CODES[GatewayUnreachable] == 6
    assert f"cannot reach the gateway at {url}/" in _one_line(result)


def test_tasks_lists_what_was_submitted(gateway: str) -> None:
    submitted = _taskyard(
        "--gateway", gateway, "--api-key", "key-a", "submit", "listed task", "--no-follow"
    )
    task_id = submitted.stdout.split()[1]
    listed = _taskyard("--gateway", gateway, "--api-key", "key-a", "tasks", "--limit", "1")
    assert listed.returncode == 0
    (line,) = listed.stdout.splitlines()
    assert line.startswith(f"{task_id}  queued") and line.endswith("listed task")


def test_options_have_help_naming_their_environment_variables() -> None:
    text = " ".join(_taskyard("--help").stdout.split())
    assert "the gateway's URL (env TASKYARD_URL" in text
    assert "your API key (env TASKYARD_API_KEY" in text
