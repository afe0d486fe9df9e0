"""The `taskyard` command: help for every subcommand, clear errors for bad usage."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _taskyard(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "shared.cli", *args], capture_output=True, text=True, timeout=30
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
