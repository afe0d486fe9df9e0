"""The `taskyard` command: help for every subcommand, clear errors for bad usage."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from shared.cli import _parser, local_stack
from shared.settings import Settings


def _taskyard(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "shared.cli", *args],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, **env},
    )


@pytest.mark.parametrize("args", [(), ("up",), ("submit",), ("get",)])
def test_help(args: tuple[str, ...]) -> None:
    result = _taskyard(*args, "--help")
    assert result.returncode == 0
    assert result.stdout.startswith("usage: taskyard")


def test_missing_argument_is_a_usage_error() -> None:
    result = _taskyard("submit")
    assert result.returncode == 2
    assert "the following arguments are required: text" in result.stderr


def test_up_refuses_bad_settings_before_starting_anything() -> None:
    result = _taskyard("up", "--gateway-port", "1", TASKYARD_API_KEYS="justakey")
    assert result.returncode == 2
    assert "TASKYARD_API_KEYS must be key=tenant pairs separated by commas" in result.stderr
    assert "unpack" not in result.stderr and "starting" not in result.stdout


def test_up_serves_the_environments_api_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASKYARD_API_KEYS", "k1=team-a,k2=team-b")
    stack = local_stack(_parser().parse_args(["up"]), Settings())
    assert stack.env()["TASKYARD_API_KEYS"] == "k1=team-a,k2=team-b"  # what the gateway reads
    assert stack.api_key == "k1"  # the demo task's
