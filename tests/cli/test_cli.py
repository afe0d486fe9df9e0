"""The `taskyard` command: help for every subcommand, clear errors for bad usage, and a clear
line for a development command without the development package."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from dev_install import taskyard_cli

from taskyard.client.cli import main

NOT_INSTALLED = "taskyard: up is a development command: run `make up` in a taskyard checkout"


def _taskyard(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "taskyard.client.cli", *args],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, **env},
    )


@pytest.mark.parametrize("args", [(), ("submit",), ("get",)])
def test_help(args: tuple[str, ...]) -> None:
    result = _taskyard(*args, "--help")
    assert result.returncode == 0
    assert result.stdout.startswith("usage: taskyard")


def test_missing_argument_is_a_usage_error() -> None:
    result = _taskyard("submit")
    assert result.returncode == 2
    assert "the following arguments are required: text" in result.stderr


@pytest.mark.parametrize("args", [("up",), ("up", "--sandbox", "local"), ("up", "--help")])
def test_up_without_the_entry_point_says_it_is_for_development(
    args: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(list(args), contributed=[]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1  # one line
    assert err.startswith(NOT_INSTALLED) and "the service and dev extras" in err


def test_up_whose_package_is_not_shipped_says_the_same(capsys: pytest.CaptureFixture[str]) -> None:
    # The production image: the metadata names the entry point, the package is not there.
    shipped = EntryPoint("up", "devstack_not_shipped.cli:add_up", "taskyard.commands")
    assert main(["up"], contributed=[shipped]) == 2
    assert capsys.readouterr().err.startswith(NOT_INSTALLED)


def test_a_broken_contributed_command_is_not_hidden() -> None:
    broken = EntryPoint("up", "devstack.no_such_module:add_up", "taskyard.commands")
    with pytest.raises(ModuleNotFoundError, match=r"devstack\.no_such_module"):
        main(["up"], contributed=[broken])


def test_installed_without_devstack_help_works_and_up_says_one_line(tmp_path: Path) -> None:
    listing = taskyard_cli(tmp_path, "--help", with_dev_commands=False)
    assert listing.returncode == 0
    assert "(not installed: development only)" in " ".join(listing.stdout.split())
    # Bad settings too: should the real `up` be found after all, it fails here, starting nothing.
    up = taskyard_cli(tmp_path, "up", "--gateway-port", "1", with_dev_commands=False,
                      TASKYARD_API_KEYS="justakey")  # fmt: skip
    assert (up.returncode, up.stdout) == (2, "")
    assert up.stderr.startswith(NOT_INSTALLED) and up.stderr.count("\n") == 1
